from services.cache.service import CacheService
from shared.runtime.service import run_service

if __name__ == "__main__":
    run_service("cache", CacheService)
