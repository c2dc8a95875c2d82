"""StableHLO op counts of a case's block program (lowered only), by op name."""
import sys, re, collections, jax, numpy as np, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as C
from fixedopt._driver import ahead
import fixedopt
class Got(Exception): pass
def grab(before, compiled, *args, **kw):
    raise Got(before().as_text())
ahead.start = grab
def count(call):
    try: call()
    except Got as g:
        text = str(g)
        ops = re.findall(r"= (?:\"?)([a-z_]+\.[a-z_]+)", text)
        c = collections.Counter(ops)
        return len(ops), c.most_common(6)
from fixedopt._models import lineshapes
def spectrum10(x, a1, c1, s1, f1, a2, c2, s2, f2, slope, offset):
    return lineshapes.pvoigt(x, a1, c1, s1, f1) + lineshapes.pvoigt(x, a2, c2, s2, f2) + slope * x + offset
p0, fixed, y = C.spectra_data(2000, 0, slow=True)
lo, hi = C.SPECTRA_BOUNDS
ins = lambda a, v: np.insert(np.insert(a, 3, v, axis=-1), 7, v, axis=-1)
p10, f10 = ins(p0, 0.37), ins(fixed, True)
b10 = (ins(lo, -np.inf), ins(hi, np.inf))
cases = {
 "curve_fit 8 (benchmark pvoigt)": lambda: fixedopt.curve_fit(C.spectrum, C.X_SPECTRA, y, p0, bounds=C.SPECTRA_BOUNDS, fixed=fixed, batched=True),
 "curve_fit 10 (lmfit pvoigt, fractions fixed)": lambda: fixedopt.curve_fit(spectrum10, C.X_SPECTRA, y, p10, bounds=b10, fixed=f10, batched=True),
 "models": C.models(2000)["call"],
}
for name, call in ([] if len(sys.argv) > 1 else cases.items()):
    print(name, count(call), flush=True)
def spectrum8l(x, a1, c1, s1, a2, c2, s2, slope, offset):
    return lineshapes.pvoigt(x, a1, c1, s1, 0.37) + lineshapes.pvoigt(x, a2, c2, s2, 0.37) + slope * x + offset
print("curve_fit 8 (lmfit pvoigt, fraction 0.37 a constant)", count(lambda: fixedopt.curve_fit(spectrum8l, C.X_SPECTRA, y, p0, bounds=C.SPECTRA_BOUNDS, fixed=fixed, batched=True)), flush=True)
