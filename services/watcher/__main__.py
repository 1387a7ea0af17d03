from services.watcher.service import Watcher
from shared.runtime.service import run_service

if __name__ == "__main__":
    run_service("watcher", Watcher)
