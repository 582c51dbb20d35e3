#!/usr/bin/env python3
"""scripts/fit_kernel_shapes.py --import-xla on a miniature of XLA's matmul_interpolator_data.h:
the device asked for, its bf16 column only, rows sorted by (batch, m, n, k); an unknown device or
an unreadable file is an error naming what there is, exit 2 and nothing on stdout."""

import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fit_kernel_shapes.py"

HEADER = '''constexpr char kDefaultMatmulPTable[] = R"pb(
  entries {
    key: "sm_100"
    value {
      entries {
        b: 1
        m: 512
        n: 256
        k: 256
        flops { key: "bf16xbf16->bf16" value: 300 }
        flops { key: "f32xf32->f32" value: 3 }
      }
    }
  }
  entries {
    key: "sm_90"
    value {
      entries {
        b: 2
        m: 256
        n: 256
        k: 256
        flops { key: "bf16xbf16->bf16" value: 200 }
        flops { key: "f32xf32->f32" value: 2 }
      }
      entries {
        b: 1
        m: 256
        n: 512
        k: 256
        flops { key: "bf16xbf16->bf16" value: 100 }
        flops { key: "f32xf32->f32" value: 1 }
      }
    }
  }
)pb";
'''


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), "--import-xla", *args],
                          capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        header = Path(tmp) / "matmul_interpolator_data.h"
        header.write_text(HEADER)
        expected = {
            (): "batch,m,n,k,bf16_flop_per_s\n1,256,512,256,100\n2,256,256,256,200\n",
            ("sm_100",): "batch,m,n,k,bf16_flop_per_s\n1,512,256,256,300\n",
        }
        for key, want in expected.items():
            r = run(str(header), *key)
            if r.returncode != 0 or r.stdout != want:
                failures.append(f"{key or 'sm_90'}: exit {r.returncode}, stdout {r.stdout!r}")
        for args, message in (((str(header), "sm_80"), "(it has: sm_100, sm_90)"),
                              ((str(Path(tmp) / "missing.h"),), "cannot read")):
            r = run(*args)
            if r.returncode != 2 or r.stdout or message not in r.stderr:
                failures.append(f"{args}: exit {r.returncode}, stdout {r.stdout!r}, "
                                f"stderr {r.stderr!r}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
