/* lookup.c: prompt lookup drafting: a sequence's last few tokens searched for earlier in it, and
 * what followed them there proposed as what follows now. */
#include <string.h>

#include "oxidize.h"

int32_t ox_spec_lookup(const ox_token *h, size_t n_h, int32_t ngram_min, int32_t ngram_max,
                       int32_t max, ox_token *out) {
    if (!h || !out || max <= 0)
        return 0;
    for (int n = ngram_max; n >= ngram_min && n >= 1; n--) {
        if ((size_t)n >= n_h)
            continue;
        const ox_token *key = h + n_h - n;
        /* the latest match first: recent text predicts what comes next best */
        for (size_t i = n_h - n; i-- > 0;) {
            if (h[i] != key[0] || memcmp(h + i, key, (size_t)n * sizeof *h) != 0)
                continue;
            /* what followed, and past the end of h the same again: text that repeats with a
             * period shorter than the draft goes on repeating */
            size_t from = i + (size_t)n;
            for (int j = 0; j < max; j++)
                out[j] = from + j < n_h ? h[from + j] : out[from + j - n_h];
            return max;
        }
    }
    return 0;
}
