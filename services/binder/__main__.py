from services.binder.service import Binder
from shared.runtime.service import run_service

if __name__ == "__main__":
    run_service("binder", Binder)
