/* The activations: element-wise functions that the unary kernel applies as its op
 * (params/unary.h) and the matmul epilogue as its `activation` (params/matmul.h).  The codes are
 * unary ops, so the epilogue's VKG_UNARY_COPY (0) means no activation.
 *
 * Each gated activation x * g(x), with g in [0, 1], gives the limits it tends to: x at +inf and
 * -0 at -inf (not -inf * 0 = NaN), and NaN stays NaN.  Sigmoids are 1 / (1 + exp(-z)): exp
 * overflowing gives 0 and underflowing gives 1, never a NaN. */
#ifndef VKG_PARAMS_ACTIVATION_H
#define VKG_PARAMS_ACTIVATION_H

#define VKG_UNARY_COPY 0u
#define VKG_UNARY_GELU 2u       /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as
                                   x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)): no cancellation in
                                   the negative tail                                          */
#define VKG_UNARY_RELU 3u       /* x > 0 ? x : 0; NaN gives 0                                  */
#define VKG_UNARY_GELU_ERF 5u   /* x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): the exact GELU       */
#define VKG_UNARY_QUICK_GELU 6u /* x sigmoid(1.702 x)                                          */
#define VKG_UNARY_SILU 7u       /* x sigmoid(x), also called swish                             */

#endif
