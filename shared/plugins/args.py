"""Moved to shared/framework/plugin_args.py. Kept for schedulinggates.py only, which is
being changed on another branch: delete this once it imports the new home."""

from shared.framework.plugin_args import arg_error, reject_unknown

__all__ = ["arg_error", "reject_unknown"]
