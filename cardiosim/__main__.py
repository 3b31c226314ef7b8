import sys

from cardiosim.cli import main

sys.exit(main())
