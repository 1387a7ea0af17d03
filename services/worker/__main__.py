from services.worker.service import Worker
from shared.runtime.service import run_service

if __name__ == "__main__":
    run_service("worker", Worker)
