// The gates kernels' arithmetic (gdn.gates, gdn.gates_ba); include after common.glsl.

// log(1 + u) for u >= 0, accurate in relative terms for small u (Vulkan's log() only
// promises an absolute error near 1): 2 atanh(u / (2 + u)) as a series below 0.5.
float log1p_pos(float u) {
  if (u > 0.5) return log(1.0 + u);
  float s = u / (2.0 + u);  // <= 0.2
  float s2 = s * s;
  return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 +
                   s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0)))))));
}

float softplus(float x) { return x > 20.0 ? x : log1p_pos(exp(x)); }

// g of one (token, value head): -exp(A_log) * softplus(a + dt_bias); beta is sigmoid(b).
float gate_g(float a, float a_log, float dt_bias) { return -exp(a_log) * softplus(a + dt_bias); }
