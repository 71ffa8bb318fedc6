/* cuda_backend.h: the CUDA backend as C code sees it: its op table (registry.c registers it).
 * Built only with -DOX_CUDA=ON (OX_HAVE_CUDA). */
#ifndef OX_BACKEND_CUDA_BACKEND_H
#define OX_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

extern const struct backend_ops backend_cuda_ops;

#ifdef __cplusplus
extern "C" {
#endif
/* How many int8 matmuls have run as streams (cuda_mmq_tile.cuh's mq_stream), process-wide: the
 * tests check the shapes meant to take that path took it. */
unsigned long cuda_mmq_streamed(void);
#ifdef __cplusplus
}
#endif

#endif
