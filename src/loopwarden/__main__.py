import sys

if sys.argv[1:2] == ["hook"]:  # once per tool call of a coding CLI: the fast path, no argparse
    from loopwarden.hooks._client import main as hook
    from loopwarden.hooks._client import plain

    if plain(sys.argv[2:]):  # else --help or a mistake: the command line's parser says so
        sys.exit(hook(sys.argv[2:]))

from loopwarden.cli import main

sys.exit(main())
