import time, sys, jax
jax.config.update("jax_enable_x64", True)
from benchmarks import first_call_cases as C
from fixedopt._driver import engine
import benchmarks.first_call as F
def go(b):
    calls = C.models(b)
    t=time.process_time(); n0=engine.compiled_programs()
    with F.per_program() as progs:
        jax.block_until_ready(calls["call"]())
    print(b, "cpu %.2f"%(time.process_time()-t), "solve programs +%d"%(engine.compiled_programs()-n0),
          {k: (v["count"], round(v["compile"],2)) for k,v in progs.items()}, flush=True)
go(2000); go(200); go(200)
