/* ftype.c: names, parsing and base types of model file types (llama.cpp's llama_ftype). */
#define _POSIX_C_SOURCE 200809L
#include "quant/ftype.h"

#include <stdlib.h>
#include <strings.h>

#include "core/status.h"

static const struct {
    const char *name;
    int base; /* ox_dtype; -1 marks ids that are not file types */
} ftypes[OX_FTYPE_COUNT] = {
#define X(name, id, str, base) [id] = {str, OX_DTYPE_##base},
    OX_FTYPE_LIST(X)
#undef X
};

/* llama-quantize's shorthands: the plain k-quant names mean the _M mix. */
static const struct {
    const char *alias;
    enum ox_ftype ftype;
} aliases[] = {
    {"Q3_K", OX_FTYPE_MOSTLY_Q3_K_M},
    {"Q4_K", OX_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K", OX_FTYPE_MOSTLY_Q5_K_M},
};

bool ftype_base_dtype(int ftype, enum ox_dtype *out) {
    if (ftype < 0 || ftype >= OX_FTYPE_COUNT || !ftypes[ftype].name)
        return false;
    *out = (enum ox_dtype)ftypes[ftype].base;
    return true;
}

const char *ox_ftype_name(enum ox_ftype ftype) {
    enum ox_dtype base;
    return ftype_base_dtype((int)ftype, &base) ? ftypes[ftype].name : NULL;
}

enum ox_status ox_ftype_parse(const char *name, enum ox_ftype *out) {
    if (!name || !out)
        return ox_fail(OX_ERR_INVALID_ARG, "ftype: NULL argument");
    for (int i = 0; i < OX_FTYPE_COUNT; i++) {
        if (ftypes[i].name && strcasecmp(name, ftypes[i].name) == 0) {
            *out = (enum ox_ftype)i;
            return OX_OK;
        }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].ftype;
            return OX_OK;
        }
    }
    char *end;
    long id = strtol(name, &end, 10);
    enum ox_dtype base;
    if (*name && !*end && id >= 0 && id < OX_FTYPE_COUNT && ftype_base_dtype((int)id, &base)) {
        *out = (enum ox_ftype)id;
        return OX_OK;
    }
    return ox_fail(OX_ERR_INVALID_ARG, "unknown file type '%s' (try Q4_K_M, Q8_0, IQ4_XS, ...)",
                   name);
}
