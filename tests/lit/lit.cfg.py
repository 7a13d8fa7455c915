# lit configuration of pcc's textual-IR tests.
#
# Run: python /usr/lib/llvm-14/build/utils/lit/lit.py -sv tests/lit --param pcc_bin=BUILD_DIR
# (tests/CMakeLists.txt registers exactly this as the ctest `lit`).
import os
import sys

import lit.formats

config.name = "pcc"
# lit's internal shell: pipes, `not` and `%s` work the same on every machine.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

pcc_bin = lit_config.params.get("pcc_bin")
if not pcc_bin:
    lit_config.fatal("pass --param pcc_bin=BUILD_DIR (the directory holding pcc-opt)")
pcc_bin = os.path.abspath(pcc_bin)
config.test_exec_root = os.path.join(pcc_bin, "tests", "lit")

llvm_bin = "/usr/lib/llvm-14/bin"

# Longer names first: lit substitutes in order, and %pcc is a prefix of the others.
config.substitutions.append(("%pcc-opt", os.path.join(pcc_bin, "pcc-opt")))
config.substitutions.append(("%pcc-run", os.path.join(pcc_bin, "pcc-run")))
config.substitutions.append(("%pcc-report", os.path.join(pcc_bin, "pcc-report")))
config.substitutions.append(("%pcc", os.path.join(pcc_bin, "pcc")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("FileCheck", os.path.join(llvm_bin, "FileCheck")))

config.environment["PCC_SOURCE_DIR"] = os.path.dirname(os.path.dirname(config.test_source_root))
