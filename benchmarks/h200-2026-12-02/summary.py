"""Print one line per frigg-bench decode row of the JSON-lines files named on the command line."""
import json
import sys

for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("bench") != "decode":
            continue
        print(f"{path.split('/')[-1]:20} b{r['batch']:>2} ctx {r['ctx']:>4} {r['tok_s']:8.1f} tok/s {r['ms_per_step']:7.3f} ms"
              f"  roof {r.get('roofline_frac')}  {r.get('decode_proj')}/{r.get('gemv_impl')} kps {r['kernels_per_step']}"
              f"  {r['sm_clock_mhz']} MHz {r['temp_c']} C")
