"""Settings for every test process: a hook server started by a test leaves soon after it."""

import os

# The coding-CLI hooks start a resident server per state folder, and every test has its own
# folder: a few seconds of idling instead of ten minutes keeps them from piling up.
os.environ.setdefault("LOOPWARDEN_HOOK_IDLE", "5")
