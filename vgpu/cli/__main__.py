import sys

from vgpu.cli import main

sys.exit(main())
