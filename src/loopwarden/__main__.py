import sys

if sys.argv[1:2] == ["hook"]:  # once per tool call of a coding CLI: the fast path, no argparse
    from loopwarden.hooks._client import main as hook

    sys.exit(hook(sys.argv[2:]))

from loopwarden.cli import main

sys.exit(main())
