// Shared by every metrale compute shader: extensions, the generated argument block,
// bf16 storage, typed device-address views and workgroup reductions.
//
// Storage and numerics follow core/include/metrale/kernels.def: bf16 values live in
// 16-bit storage and are converted explicitly (round to nearest even, NaN kept NaN, as
// core/include/metrale/bf16.h); all arithmetic is fp32.  Reductions go through shared
// memory only: no kernel may assume a subgroup width (lavapipe 8, NVIDIA 32, AMD 64).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

// push constants + LOCAL_SIZE for METRALE_KERNEL_<name> (tools/gen/vk_push_constants.c)
#include "metrale_vk_args.glsl"

#if (LOCAL_SIZE & (LOCAL_SIZE - 1)) != 0
#error "the reductions need a power-of-two block size"
#endif

layout(local_size_x = LOCAL_SIZE, local_size_y = 1, local_size_z = 1) in;

// Typed views of a device address (gpu_ptr).
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BF16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32 { int v[]; };
// f32 moved as raw bits, where a contract promises exact copies (NaN payloads included)
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v[]; };
// One 16-byte load or store (8 bf16 or 4 f32) at an address the caller has checked is
// 16-byte aligned.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer U32x4 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer F32x4 { vec4 v; };

// Views starting `elems` elements after `base`; offsets are 64-bit so that expert
// tensors beyond 4 GiB index correctly.
BF16 bf16_at(uint64_t base, uint64_t elems) { return BF16(base + elems * 2ul); }
F32 f32_at(uint64_t base, uint64_t elems) { return F32(base + elems * 4ul); }
I32 i32_at(uint64_t base, uint64_t elems) { return I32(base + elems * 4ul); }
U32 u32_at(uint64_t base, uint64_t elems) { return U32(base + elems * 4ul); }

// 16-bit storage allows 16-bit values only in memory and in conversions, hence macros
// at the loads and stores and 32-bit arithmetic everywhere else.
#define bf16_to_f32(h) uintBitsToFloat(uint(h) << 16)
// the two bf16 of a 32-bit word (little-endian: element 2c in the low half, 2c + 1 high)
#define bf16_lo(u) uintBitsToFloat((u) << 16)
#define bf16_hi(u) uintBitsToFloat((u) & 0xffff0000u)
#define f32_to_bf16(f) uint16_t(bf16_bits(f))

// the 8 bf16 of one 16-byte load (U32x4), in memory order
void bf16x8(uvec4 q, out float f[8]) {
  for (uint c = 0; c < 4u; c++) {
    f[2u * c] = bf16_lo(q[c]);
    f[2u * c + 1u] = bf16_hi(q[c]);
  }
}

uint bf16_bits(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float silu(float x) { return x / (1.0 + exp(-x)); }

// ---- workgroup reductions (every invocation must call them, in uniform control flow)

shared float red_f32[LOCAL_SIZE];

// the sum of v over each group of G consecutive invocations (G a power of two dividing
// LOCAL_SIZE), every invocation getting its group's
float group_sum(float v, uint G) {
  uint t = gl_LocalInvocationID.x, base = t - t % G;
  red_f32[t] = v;
  memoryBarrierShared();
  barrier();
  for (uint s = G / 2u; s > 0u; s >>= 1) {
    if (t % G < s) red_f32[t] += red_f32[t + s];
    memoryBarrierShared();
    barrier();
  }
  float r = red_f32[base];
  barrier();  // red_f32 may be reused right after
  return r;
}

float block_sum(float v) { return group_sum(v, LOCAL_SIZE); }

float block_max(float v) {
  uint t = gl_LocalInvocationID.x;
  red_f32[t] = v;
  memoryBarrierShared();
  barrier();
  for (uint s = LOCAL_SIZE / 2; s > 0; s >>= 1) {
    if (t < s) red_f32[t] = max(red_f32[t], red_f32[t + s]);
    memoryBarrierShared();
    barrier();
  }
  float r = red_f32[0];
  barrier();
  return r;
}
