"""The asset store: one on-disk format for every precomputed thing (modal models, PAN fields, FFAT maps...)."""
from .store import (ASSET_FORMAT_VERSION, Asset, asset_lock, cache_dir, content_hash, file_sha256, hash_arrays, read_asset,
                    write_asset)

__all__ = ["ASSET_FORMAT_VERSION", "Asset", "asset_lock", "cache_dir", "content_hash", "file_sha256", "hash_arrays", "read_asset",
           "write_asset"]
