/* Private parts of the Qwen3 SSM layer, shared by its source files. */
#ifndef METRALE_QWEN3_SSM_LAYER_H
#define METRALE_QWEN3_SSM_LAYER_H

#include "metrale/qwen3_ssm.h"
#include "ops/ops.h"

/* FFN work is token-independent, so it runs in chunks of tokens to bound its buffers (ffn.c,
 * qwen3_ssm_ffn_chunk).  The grouped expert projections read every routed expert's weights
 * once a chunk (3.2 GB at the 80B-A3B shape), so chunks of 2048 tokens read them twice for a
 * 4096-token prompt (H200, layer prefill 4096: 4.89 -> 3.62-3.68 ms, 16384: 19.1 -> 14.5-14.8
 * ms; docs/perf-moe.md).  QWEN3_SSM_FFN_CHUNK_GROUPED where the routed experts take the
 * grouped kernels with bf16 outputs at that size (H100, layer prefill 16384: 9.69 -> 7.75 ms
 * against 4096), else QWEN3_SSM_FFN_CHUNK. */
#define QWEN3_SSM_FFN_CHUNK 4096u
#define QWEN3_SSM_FFN_CHUNK_GROUPED 16384u

typedef struct qwen3_ssm_dims {
  uint32_t H;            /* hidden */
  uint32_t nk, nv, dk, dv, r; /* r = nv / nk */
  uint32_t C, K;         /* conv channels, conv width */
  uint32_t P;            /* projection width: what one stacked in_proj GEMM produces */
  uint32_t I;            /* dense intermediate */
  uint32_t E, topk, mI, sI; /* experts, top-k, expert and shared-expert widths */
  float eps;
} qwen3_ssm_dims;

typedef struct qwen3_ssm_weights {
  gpu_ptr in_norm;   /* bf16 [H]            input_layernorm, applied as (1 + w) */
  gpu_ptr post_norm; /* bf16 [H]            post_attention_layernorm, (1 + w) */
  gpu_ptr in_proj;   /* bf16 [P, H]         Next: qkvz ; ba   3.5: qkv ; z ; b ; a */
  gpu_ptr conv;      /* bf16 [C, K] */
  gpu_ptr a_log;     /* f32  [nv] */
  gpu_ptr dt_bias;   /* bf16 [nv] */
  gpu_ptr gnorm;     /* bf16 [dv]           gated RMSNorm weight, used as is */
  gpu_ptr out_proj;  /* bf16 [H, nv*dv] */
  gpu_ptr in_proj16; /* fp16 [P, H]         in_proj in IEEE half for gemm_f16_ws; 0: none */
  /* dense MLP */
  gpu_ptr mlp_gate_up; /* bf16 [2I, H]  gate rows then up rows */
  gpu_ptr mlp_down;    /* bf16 [H, I] */
  /* MoE */
  gpu_ptr router;      /* bf16 [E+1, H]  router rows then shared_expert_gate */
  gpu_ptr exp_gate_up; /* bf16 [E, 2mI, H] */
  gpu_ptr exp_down;    /* bf16 [E, H, mI] */
  gpu_ptr sh_gate_up;  /* bf16 [2sI, H] */
  gpu_ptr sh_down;     /* bf16 [H, sI] */
} qwen3_ssm_weights;

/* Scratch buffers of one forward call, carved from one allocation. */
typedef struct qwen3_ssm_scratch {
  gpu_ptr xn;      /* f32  [T, H]  normed layer input = the mixer's input (part=layer) */
  gpu_ptr proj;    /* f32  [T, P]  (f32 up to the recurrence: kernels.def); decode only */
  gpu_ptr x16;     /* fp16 [T, H]  prefill: x for gemm_f16_ws, in proj's bytes */
  gpu_ptr x16_decode; /* fp16 [T, H]  decode: x for gemm_f16_ws, in mixed's bytes */
  gpu_ptr mixed;   /* f32  [T, C]  conv input q|k|v (IEEE half [T, C] in its first half
                      where prefill's in_proj is gemm_f16_ws_cols3q: mixer.c) */
  gpu_ptr vh;      /* fp16 [T, nv*dv] prefill: the conv's v for the fp16 core, in mixed's
                      bytes after the half mixed (mixer.c) */
  gpu_ptr z;       /* f32  [T, nv*dv] */
  gpu_ptr b, a;    /* f32  [T, nv] */
  gpu_ptr qkv;     /* f32  [T, C]  conv output, l2-normalised in place */
  gpu_ptr g, beta; /* f32  [T, nv] */
  gpu_ptr o;       /* bf16 [T, nv*dv] delta-rule output */
  gpu_ptr on;      /* bf16 [T, nv*dv] gated-norm output */
  gpu_ptr mix_out; /* bf16 [T, H]  mixer output */
  gpu_ptr h;       /* bf16 [T, H]  residual after the mixer */
  gpu_ptr hn;      /* bf16 [T, H]  post-attention-normed */
  gpu_ptr cu;      /* i32 [S+1] */
  gpu_ptr slots;   /* i32 [S] */
  /* FFN, per chunk of Tc tokens */
  gpu_ptr f_gu;    /* bf16 [Tc*k, 2mI] (none where the path has no gu: metrale_ops_moe_bytes) or dense [Tc, 2I] */
  gpu_ptr f_act;   /* bf16 [Tc*k, mI] or dense [Tc, I] */
  gpu_ptr f_out;   /* bf16 [Tc, H]  dense down / shared expert out */
  gpu_ptr logits;  /* f32  [Tc, E+1] */
  gpu_ptr idx;     /* i32  [Tc, k] */
  gpu_ptr perm;    /* i32  [Tc*k]  routed rows by expert (moe_sort) */
  gpu_ptr tiles;   /* i32  [ceil(Tc*k/64) + E + 1, 3] */
  gpu_ptr rw;      /* f32  [Tc, k] */
  gpu_ptr ey;      /* f32  [Tc*k, H], or bf16 where the path writes bf16 (metrale_ops_moe_bytes) */
  gpu_ptr s_gu;    /* bf16 [Tc, 2sI] */
  gpu_ptr s_act;   /* bf16 [Tc, sI] */
} qwen3_ssm_scratch;

/* Host copies of slot lists that may be queued for upload at once (layer.c upload_lists). */
#define QWEN3_SSM_LIST_RING 16u

/* A recorded decode step and what it was recorded for (graphs.c).  A layer keeps at most
 * QWEN3_SSM_GRAPHS of them.  With all taken, a new key's step replaces the least recently
 * replayed recording only once that one has gone QWEN3_SSM_GRAPH_IDLE decode steps without a
 * replay; until then the new key's steps run eagerly, so keys going round in a loop longer
 * than the cache keep most of their recordings instead of recording every step. */
#define QWEN3_SSM_GRAPHS 32u
#define QWEN3_SSM_GRAPH_IDLE (2u * QWEN3_SSM_GRAPHS)
typedef struct qwen3_ssm_graph {
  gpu_graph graph; /* NULL: an empty entry */
  metrale_part part;
  const metrale_state_pool *pool;
  gpu_ptr conv, rec; /* the pool's buffers */
  gpu_ptr x, y;
  uint32_t batch;
  gpu_stream st;
  uint64_t used; /* the layer's graph_steps when it was last recorded or replayed */
} qwen3_ssm_graph;

struct metrale_qwen3_ssm_layer {
  metrale_device *dev;
  metrale_ops ops;
  metrale_qwen3_config cfg;
  uint32_t layer_index;
  int qwen35;
  int moe;
  qwen3_ssm_dims d;
  qwen3_ssm_weights w;
  gpu_ptr weight_block; /* one allocation holding every weight */
  char f16_off[160];    /* why w.in_proj16 is 0 where the weights forbid it ("" otherwise) */
  uint64_t weight_bytes;
  /* scratch sized for scratch_tokens tokens and scratch_seqs sequences */
  gpu_ptr scratch_block;
  uint32_t scratch_tokens, scratch_seqs;
  qwen3_ssm_scratch s;
  /* The slot lists (and cu_seqlens) put into s.slots / s.cu (layer.c upload_lists).  A new
   * list is copied from an entry of this ring of host copies, which must outlive its queued
   * copy: an entry is written again only QWEN3_SSM_LIST_RING lists later, after a device sync,
   * so a serving loop whose batch changes every step syncs once a ring instead of once a
   * step.  The newest entry is also the cache: a call with the same lists as the last one
   * uploads nothing. */
  int32_t *lists_host;      /* [QWEN3_SSM_LIST_RING][2 * scratch_seqs + 1]: slots then cu_seqlens */
  uint32_t lists_at;        /* the newest entry */
  uint32_t lists_queued;    /* entries written since the last device sync */
  uint32_t lists_n;         /* sequences in the newest entry; 0 = nothing cached */
  int lists_decode;         /* the newest entry came from a decode call (no cu) */
  /* Workspace of the chunked delta-rule prefill (kernels.def delta_rule_prefill_chunked),
   * sized for the largest prefill so far; 0 while none needed one. */
  gpu_ptr delta_ws;
  uint64_t delta_ws_bytes;
  /* decode steps recorded as graphs (graphs.c) */
  qwen3_ssm_graph graphs[QWEN3_SSM_GRAPHS];
  uint64_t graph_steps; /* decode steps taken with graphs on: the clock of graphs[].used */
  int graphs_off; /* metrale_qwen3_ssm_layer_set_graphs(L, 0) */
  /* A MoE layer's second stream, where the backend has stream_wait: the shared expert runs
   * there beside the routed experts (ffn.c); has_side 0: one stream. */
  gpu_stream side;
  int has_side;
  int side_off; /* metrale_qwen3_ssm_layer_set_second_stream(L, 0) */
  /* A MoE layer's u32 for moe_router_topk_rows (ops.h op_moe_router_topk): 0 between launches. */
  gpu_ptr router_count;
};
/* Whether the MoE FFN forks its shared expert onto L->side. */
static inline int qwen3_ssm_uses_side(const metrale_qwen3_ssm_layer *L) { return L->has_side && !L->side_off; }

/* weights.c */
metrale_status qwen3_ssm_load_weights(metrale_qwen3_ssm_layer *L, metrale_weight_source src);
/* scratch.c: makes room for T tokens and S sequences (keeps the old buffers on failure). */
metrale_status qwen3_ssm_scratch_reserve(metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S);
/* scratch.c: makes L->delta_ws large enough for a prefill of T tokens in S sequences (no-op
 * when the delta rule runs sequentially there). */
metrale_status qwen3_ssm_delta_ws_reserve(metrale_qwen3_ssm_layer *L, uint32_t T, uint32_t S);
/* mixer.c: whether a prefill of T tokens with an fp16 in_proj projects all of it by one GEMM
 * (gemm_f16_ws_cols3 into q|k|v, z and [b | a]); the audit (layer.c) names the same choice. */
int qwen3_ssm_one_in_proj(const metrale_ops *o, const qwen3_ssm_dims *d, uint32_t T);
/* Whether the mixer of T tokens reads its input only as fp16 (the prefill's one in_proj, a
 * decode batch's in_proj on fp16 x), and the scratch buffer it then converts x into (s.x16 or
 * s.x16_decode). */
int qwen3_ssm_mixer_takes_x16(const metrale_qwen3_ssm_layer *L, uint32_t T, int decode);
/* The same for a layer of dims d on ops; have16: it has its fp16 in_proj (the audit's shapes). */
int qwen3_ssm_takes_x16(const metrale_ops *o, const qwen3_ssm_dims *d, int have16, uint32_t T, int decode);
gpu_ptr qwen3_ssm_mixer_x16(const metrale_qwen3_ssm_layer *L, int decode);
/* mixer.c: out bf16 [T,H] = mixer(x f32 [T,H]); decode: one token per slot, else the
 * sequences of s.cu (both lists already on the device in s.cu / s.slots).  x16_ready: x is
 * not given (0), its fp16 is already in qwen3_ssm_mixer_x16's buffer (the layer's input norm
 * wrote it; INTERNAL where qwen3_ssm_mixer_takes_x16 says the mixer reads f32 x). */
metrale_status qwen3_ssm_mixer(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool, gpu_ptr x,
                               gpu_ptr out, uint32_t T, uint32_t S, int decode, int x16_ready, gpu_stream st);
/* layer.c: the launches of a forward call, lists and scratch already in place. */
metrale_status qwen3_ssm_forward(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool, metrale_part part,
                                 gpu_ptr x, gpu_ptr y, uint32_t T, uint32_t S, int decode, gpu_stream st);
/* graphs.c: a decode step, replayed from a recording where the backend has graphs. */
metrale_status qwen3_ssm_decode_step(metrale_qwen3_ssm_layer *L, metrale_state_pool *pool,
                                     metrale_part part, gpu_ptr x, gpu_ptr y, uint32_t batch,
                                     gpu_stream st);
/* graphs.c: 1 when decode steps are recorded and replayed. */
int qwen3_ssm_graphs_used(const metrale_qwen3_ssm_layer *L);
/* graphs.c: forgets every recording (their scratch is about to go, or the layer). */
void qwen3_ssm_graphs_clear(metrale_qwen3_ssm_layer *L);
/* ffn.c: the tokens of one FFN chunk for a layer of dims d (moe: its FFN is the MoE) on ops. */
uint32_t qwen3_ssm_ffn_chunk(const metrale_ops *o, const qwen3_ssm_dims *d, int moe);
/* ffn.c: out[T,H] = res + FFN(xn) for T tokens. */
metrale_status qwen3_ssm_ffn(metrale_qwen3_ssm_layer *L, gpu_ptr out, gpu_ptr res, gpu_ptr xn,
                             uint32_t T, gpu_stream st);

#endif
