/* cuda_backend.h: the CUDA backend as C code sees it: its op table (registry.c registers it).
 * Built only with -DOX_CUDA=ON (OX_HAVE_CUDA). */
#ifndef OX_BACKEND_CUDA_BACKEND_H
#define OX_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

extern const struct backend_ops backend_cuda_ops;

#endif
