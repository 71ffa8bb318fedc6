/* imatrix.h: importance matrices (llama.cpp's imatrix files) for quantization. */
#ifndef OX_MODEL_IMATRIX_H
#define OX_MODEL_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strmap.h"

/* One weight matrix's importance: the mean squared activation of each input column, per
 * expert for MoE tensors ([n_expert][n_per_row]). */
struct imatrix_entry {
    char *name; /* the weight's tensor name, "blk.0.attn_q.weight" */
    float *values;
    int64_t n;
};

struct imatrix {
    struct imatrix_entry *entries;
    size_t n_entries;
    struct strmap index; /* name -> entry */
    char *dataset;       /* the first calibration dataset named in the file, or NULL */
    int32_t chunk_count; /* chunks the statistics were collected over (0: unknown) */
};

/* Load a GGUF imatrix (tensors <name>.in_sum2 + <name>.counts, keys imatrix.datasets /
 * chunk_count / chunk_size) or the legacy binary format; values are normalised by their counts
 * exactly as llama-quantize does. Malformed files are OX_ERR_FORMAT naming the problem. */
enum ox_status imatrix_load(const char *path, struct imatrix *out);
void imatrix_free(struct imatrix *im);
/* The entry for a weight tensor, or NULL. */
const struct imatrix_entry *imatrix_find(const struct imatrix *im, const char *name);

#endif
