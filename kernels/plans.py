"""The names of explicit LayerNorm launch plans and the register-held kernels' width limit.

Standard library only, below both ``registry`` (which lists the implementations) and ``cuda`` (which
launches them), so that neither imports the other.
"""

from __future__ import annotations

import re

HELD_MAX_N = 16384  # the register-held kernels keep at most 8 float4 slots x 512 threads
# Threads per row of the register-held plans: any whole number of warps up to 1024 (rows whose
# width is no power of two are held with fewer masked slots by 800 threads than by 512 or 1024).
THREADS = "|".join(str(t) for t in range(1024, 0, -32))

# An explicit register-held configuration, for trying launch plans in a sweep without editing
# the dispatcher: held_t<threads per row, a multiple of 32>[_r<rows per block>][_c<cache policy 0-5, plus 8 to load
# gamma and beta with x>][_m<min blocks>][_o<at most this many resident blocks per SM, by
# reserving shared memory>].
HELD_NAME = re.compile(
    rf"^held_t(?P<tpr>{THREADS})(?:_r(?P<rpb>[124]))?(?:_c(?P<cache>1[0-3]|[0-58-9]))?(?:_m(?P<minb>\d+))?"
    r"(?:_o(?P<cap>[1-8]))?(?P<fixed>_f)?$"
)
# The same for the shared-memory-staged kernel (aligned rows only): staged_t<threads>[_c<0-4>][_m<min blocks>].
STAGED_NAME = re.compile(r"^staged_t(?P<tpr>32|64|128|256|512|1024)(?:_c(?P<cache>[0-4]))?(?:_m(?P<minb>\d+))?$")
# Persistent blocks fed by bulk copies (sm_90+, aligned rows): bulk_t<threads>_s<rows in flight
# per block>_b<blocks per SM>[_c<cache bits: 2 evict-first loads and streaming stores, 4 streaming
# stores, 8 bulk stores, 10 both>].
BULK_NAME = re.compile(r"^bulk_t(?P<tpr>32|64|128|256|512|1024)_s(?P<stages>[1-8])_b(?P<bps>[1-8])(?:_c(?P<cache>0|2|4|8|10))?$")
# A row split across a thread-block cluster (sm_90+, aligned rows): cluster_c<blocks per row>_t<threads per block>[_c<cache 0-4>].
CLUSTER_NAME = re.compile(r"^cluster_c(?P<cs>[248])_t(?P<tpb>32|64|128|256|512|1024)(?:_c(?P<cache>[0-4]))?$")
# An explicit plan of the training kernels' forward (ln_fwd of ln_train.cu, bf16 or fp32):
# fwd_t<threads per row, a multiple of 32>_r<rows per block>_p<gamma and beta preloaded: 0 or 1>[_f: the row width
# compiled in][_c: the output rounded by cvt instructions][_g<blocks per SM>: ln_fwd_loop on that
# many blocks per SM, each striding over rows].
FORWARD_NAME = re.compile(
    rf"^fwd_t(?P<tpr>{THREADS})_r(?P<rpb>[124])_p(?P<preload>[01])(?P<fixed>_f)?(?P<cvt>_c)?"
    r"(?:_g(?P<per_sm>[1-8]|1[0-6]))?$"
)
