/* Phase 1 in segments (delta_rule_prefill_chunked_f16, phase 2): each (sequence, value head,
 * column block) part of phase 1 split into NSEG runs of consecutive chunks, one block each,
 * so that one long sequence fills more than one block an SM.  Included by gdn_chunked.cu
 * inside its anonymous namespace and sm_90a guard, before gdn_chunked_wg16.cuh.
 *
 * A segment [c0, c1) needs the state at chunk c0.  Two ways to it, both exact to what the
 * test allows:
 *   - warm-up: the gates forget.  A token's transition S -> e^(g) (I - beta k k^T) S has
 *     operator norm e^(g) max(1, |1 - beta |k|^2|), so chunks w..c0-1 shrink whatever state
 *     they start from by at least 2^(lam_w + ... + lam_(c0-1)), lam the chunk's growth bound
 *     (log2) that phase 0 wrote into the record (kRecLam).  Where that sum reaches -kDropLog2
 *     within kWarmMax chunks, the block starts from a zero state at w and runs w..c0-1 without
 *     writing o: the state it reaches at c0 differs from the true one by at most 2^-64 of the
 *     state at w (in operator norm), far below the fp16 chunk step's own rounding;
 *   - otherwise (slow gates, or k not unit) it waits for the block of the segment before to
 *     publish its state at c0 (a flag after the state, in the workspace), as the unsegmented
 *     scan would have reached it.
 * Blocks take their part and segment from a ticket (an atomic counter), segments in order,
 * so a block only ever waits for one that took a lower ticket and is already running: no
 * deadlock whatever the GPU holds at once.  The first segment reads the slot's state and
 * the last writes it: the last waits for the first's "read" flag before writing.
 *
 * The workspace after the records (nc = NC records of nv heads, P = S nv ceil(dv/32) parts):
 *   ctl words: [0] the ticket; [32 + seg P + part] segment seg's state is published;
 *              [32 + NSEG P + part] the first segment has read the slot's state;
 *              zero before the launch (the ops clear them), left as they end;
 *   then the published states, [NSEG][S][nv][dk][dv] f32. */
namespace seg {
constexpr unsigned kMax = 8;        /* segments a part at most (kernels.def) */
constexpr float kDropLog2 = 64.0f;  /* a warm-up drops at most 2^-64 of the state */
constexpr unsigned kWarmMax = 8;    /* chunks of warm-up at most; else the block waits */

__host__ __device__ constexpr size_t ctl_words(unsigned nseg, size_t parts) {
  return (32 + (nseg + 1) * parts + 31) / 32 * 32;
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *a) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned *a, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(a), "r"(v) : "memory");
}
/* Thread 0 waits for *flag, then the block (a barrier: every thread's later loads follow). */
__device__ __forceinline__ void wait_flag(const unsigned *flag, unsigned tid) {
  if (tid == 0)
    while (ld_acquire(flag) == 0) __nanosleep(128);
  __syncthreads();
}
/* After every thread's stores: the block's barrier, then thread 0 raises *flag. */
__device__ __forceinline__ void raise_flag(unsigned *flag, unsigned tid) {
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    st_release(flag, 1u);
  }
}

/* What one block of phase 2 does. */
struct plan {
  unsigned nseg, seg, part, parts;
  size_t cw, c0, c1, nch; /* chunks: warm-up from cw, o from c0, up to c1, of nch */
  bool wait;              /* the state at c0 comes from segment pred's block */
  unsigned pred;
  unsigned *ctl;          /* the control words */
  float *pub;             /* the published states */
};

__device__ __forceinline__ size_t seg_first(size_t nch, unsigned s, unsigned nseg) {
  return nch * s / nseg;
}

/* The ticket (thread 0; tk: a shared word), then the block's part and segment. */
__device__ __forceinline__ unsigned take_ticket(unsigned *ctl, unsigned *tk, unsigned tid) {
  if (tid == 0) *tk = atomicAdd(ctl, 1u);
  __syncthreads();
  return *tk;
}

/* The chunks of segment seg of a part with nch chunks and the way to its first state:
 * false for an empty segment (fewer chunks than segments).  rec0: the part's first record. */
__device__ __forceinline__ bool plan_of(plan &q, size_t nch, const uint32_t *rec0, size_t rstep) {
  q.nch = nch;
  q.c0 = seg_first(nch, q.seg, q.nseg);
  q.c1 = seg_first(nch, q.seg + 1, q.nseg);
  q.cw = q.c0;
  q.wait = false;
  q.pred = 0;
  if (q.c0 >= q.c1) return false;
  if (q.c0 == 0) return true;
  float sum = 0.0f;
  for (size_t c = q.c0; c > 0 && q.c0 - c < kWarmMax;) {
    c--;
    const uint32_t *r = rec0 + c * rstep + kRecLam;
    sum += __uint_as_float(__ldg(r)) + __uint_as_float(__ldg(r + 1)) + __uint_as_float(__ldg(r + 2)) +
           __uint_as_float(__ldg(r + 3));
    if (sum <= -kDropLog2) { /* NaN never is: waits */
      q.cw = c;
      return true;
    }
  }
  q.wait = true; /* the nearest earlier segment with chunks ends at c0 */
  q.pred = q.seg - 1;
  while (q.pred > 0 && seg_first(nch, q.pred, q.nseg) >= q.c0) q.pred--;
  return true;
}
__device__ __forceinline__ unsigned *done_flag(const plan &q, unsigned s) { return q.ctl + 32 + s * q.parts + q.part; }
__device__ __forceinline__ unsigned *read_flag(const plan &q) { return q.ctl + 32 + q.nseg * q.parts + q.part; }
/* segment s's published state of (sequence, head), row-major [dk][dv] as the slots */
__device__ __forceinline__ float *published(const plan &q, unsigned s, unsigned seq, unsigned h, const shape &p) {
  return q.pub + (((size_t)s * p.s + seq) * p.nv + h) * p.dk * p.dv;
}
}  // namespace seg
