from services.queue.service import QueueService
from shared.runtime.service import run_service

if __name__ == "__main__":
    run_service("queue", QueueService)
