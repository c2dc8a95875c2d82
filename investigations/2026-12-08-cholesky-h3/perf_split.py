"""perf report --sort sym --stdio's percentages by part: LLVM (its code generation by
symbol name), MLIR, XLA and absl, Python, libc and the rest: python perf_split.py FILE"""
import collections
import re
import sys

CODEGEN = re.compile(r"SelectionDAG|SDNode|SDValue|Machine|RegAlloc|LiveInterval|LiveRange|X86|"
                     r"TargetLowering|ScheduleDAG|MVT|EVT|MCInst|MCStream|MCObject|MCAssembler|"
                     r"RegisterCoalescer|SlotIndex|VirtRegMap|DAGCombiner|DAGTypeLegalizer|ISel|"
                     r"Spill|TargetRegister|LiveVariables|RAGreedy|InterferenceCache|TwoAddress|"
                     r"EdgeBundles|SplitEditor|SplitAnalysis|AsmPrinter|ELFObjectWriter|orc::|jitlink")
PYTHON = {"gc_collect_main", "visit_reachable", "visit_decref", "tuplerichcompare",
          "unicodekeys_lookup_unicode"}
parts = collections.Counter()
for line in open(sys.argv[1]):
    match = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(.*)", line)
    if not match:
        continue
    share, symbol = float(match.group(1)), match.group(2)
    if symbol.startswith(("llvm::", "(anonymous namespace)")):
        part = "LLVM code generation" if CODEGEN.search(symbol) else "LLVM IR and other"
    elif symbol.startswith("mlir::"):
        part = "MLIR"
    elif symbol.startswith(("xla::", "absl::", "tsl::", "ynn", "xnn")):
        part = "XLA, absl"
    elif symbol.startswith(("Py", "_Py")) or symbol in PYTHON:
        part = "Python"
    else:
        part = "libc and other"
    parts[part] += share
for part, share in parts.most_common():
    print(f"{share:6.1f}%  {part}")
