/* ftype.h: model file types (general.file_type) and their base tensor types. */
#ifndef OX_QUANT_FTYPE_H
#define OX_QUANT_FTYPE_H

#include <stdbool.h>

#include "oxidize.h"

/* The tensor type most of a file of this type is made of; false for an unknown id. */
bool ftype_base_dtype(int ftype, enum ox_dtype *out);

#endif
