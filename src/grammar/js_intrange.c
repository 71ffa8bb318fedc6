/* js_intrange.c: integers in a range as GBNF, by splitting [lo, hi] into runs of equal length
 * and those into a fixed prefix, a digit range, and free digits (the usual range-to-regex
 * construction), so minimum / maximum hold exactly. */
#include <stdio.h>

#include "grammar/json_schema.h"

/* Alternatives for the numbers from lo to hi, decimal strings of the same length n (lo <= hi). */
static enum ox_status same_len(struct jbuf *b, const char *lo, const char *hi, size_t n) {
    char tmp[64];
    size_t i = 0;
    while (i < n && lo[i] == hi[i])
        i++;
    if (i > 0) {
        snprintf(tmp, sizeof tmp, "\"%.*s\"%s", (int)i, lo, i < n ? " " : "");
        OX_TRY(js_put(b, tmp));
    }
    if (i == n)
        return OX_OK;
    lo += i, hi += i, n -= i;
    if (n == 1) {
        snprintf(tmp, sizeof tmp, "[%c-%c]", lo[0], hi[0]);
        return js_put(b, tmp);
    }
    /* lo[0] < hi[0]: lo[0] then [rest of lo .. 99..9]; the digits between with anything; hi[0]
     * then [00..0 .. rest of hi]. A full run (00..0 or 99..9) joins the middle digits. */
    size_t m = n - 1;
    char nines[24], zeros[24];
    memset(nines, '9', m), memset(zeros, '0', m);
    bool lo_full = !memcmp(lo + 1, zeros, m), hi_full = !memcmp(hi + 1, nines, m);
    char from = lo_full ? lo[0] : (char)(lo[0] + 1), to = hi_full ? hi[0] : (char)(hi[0] - 1);
    const char *sep = "";
    OX_TRY(js_put(b, "("));
    if (!lo_full) {
        snprintf(tmp, sizeof tmp, "\"%c\" (", lo[0]);
        OX_TRY(js_put(b, tmp));
        OX_TRY(same_len(b, lo + 1, nines, m));
        OX_TRY(js_put(b, ")"));
        sep = " | ";
    }
    if (from <= to) {
        snprintf(tmp, sizeof tmp, "%s[%c-%c] [0-9]{%zu}", sep, from, to, m);
        OX_TRY(js_put(b, tmp));
        sep = " | ";
    }
    if (!hi_full) {
        snprintf(tmp, sizeof tmp, "%s\"%c\" (", sep, hi[0]);
        OX_TRY(js_put(b, tmp));
        OX_TRY(same_len(b, zeros, hi + 1, m));
        OX_TRY(js_put(b, ")"));
    }
    return js_put(b, ")");
}

static size_t digits(uint64_t v) {
    size_t n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

static uint64_t pow10u(size_t n) {
    uint64_t p = 1;
    while (n--)
        p *= 10;
    return p;
}

/* Alternatives for lo..hi (0 <= lo <= hi), one run per length; has_hi false: any length up to
 * max(JS_INT_DIGITS, digits of lo). */
static enum ox_status pos_range(struct jbuf *b, uint64_t lo, bool has_hi, uint64_t hi) {
    size_t dlo = digits(lo), dhi = has_hi ? digits(hi) : dlo;
    const char *sep = "";
    OX_TRY(js_put(b, "("));
    for (size_t d = dlo; d <= dhi; d++) {
        uint64_t a = d == dlo ? lo : pow10u(d - 1);
        uint64_t z = has_hi && d == dhi ? hi : pow10u(d) - 1;
        char sa[24], sz[24];
        snprintf(sa, sizeof sa, "%llu", (unsigned long long)a);
        snprintf(sz, sizeof sz, "%llu", (unsigned long long)z);
        OX_TRY(js_put(b, sep));
        OX_TRY(same_len(b, sa, sz, d));
        sep = " | ";
    }
    size_t maxd = dlo > JS_INT_DIGITS ? dlo : JS_INT_DIGITS;
    if (!has_hi && dlo < maxd) { /* every longer number */
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s[1-9] [0-9]{%zu,%zu}", sep, dlo, maxd - 1);
        OX_TRY(js_put(b, tmp));
    }
    return js_put(b, ")");
}

enum ox_status js_int_range(struct jbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    const char *sep = "";
    OX_TRY(js_put(b, "("));
    if (!has_lo || lo < 0) { /* negatives: "-" and a magnitude, never "-0" */
        uint64_t mlo = has_hi && hi < 0 ? (uint64_t)-hi : 1;
        OX_TRY(js_put(b, "\"-\" "));
        OX_TRY(pos_range(b, mlo, has_lo, has_lo ? (uint64_t)-lo : 0));
        sep = " | ";
    }
    if (!has_hi || hi >= 0) {
        OX_TRY(js_put(b, sep));
        OX_TRY(
            pos_range(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0));
    }
    return js_put(b, ")");
}
