/* value.c: the value type's arena, text buffer, construction, containers, equality and order.
 * Also Python's float repr, which json.dumps writes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json/json.h"

struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};
struct jarena {
    struct jchunk *head;
    size_t total, cap;
    jmp_buf *oom;
};

struct jarena *jarena_new(size_t cap_bytes) {
    struct jarena *a = calloc(1, sizeof *a);
    if (a)
        a->cap = cap_bytes;
    return a;
}

void jarena_free(struct jarena *a) {
    if (!a)
        return;
    for (struct jchunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

void jarena_on_oom(struct jarena *a, jmp_buf *jb) {
    a->oom = jb;
}

void *jarena_alloc(struct jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    struct jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (a->total + cap > a->cap || !(c = malloc(sizeof *c + cap))) {
            if (a->oom)
                longjmp(*a->oom, 2);
            return NULL;
        }
        a->total += cap;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

int jbuf_put(struct jbuf *b, const char *s, size_t n) {
    if (b->limit && b->len + n > b->limit)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

struct jv jv_undef(void) {
    return (struct jv){.kind = JV_UNDEF};
}
struct jv jv_none(void) {
    return (struct jv){.kind = JV_NONE};
}
struct jv jv_bool(int b) {
    return (struct jv){.kind = JV_BOOL, .u.b = !!b};
}
struct jv jv_int(int64_t i) {
    return (struct jv){.kind = JV_INT, .u.i = i};
}
struct jv jv_float(double f) {
    return (struct jv){.kind = JV_FLOAT, .u.f = f};
}

struct jv jv_str(struct jarena *a, const char *s, size_t n) {
    struct jstr *js = jarena_alloc(a, sizeof *js + n + 1);
    if (!js)
        return jv_undef();
    js->p = (char *)(js + 1);
    if (n)
        memcpy(js->p, s, n);
    js->p[n] = 0;
    js->len = n;
    js->markup = false;
    return (struct jv){.kind = JV_STR, .u.s = js};
}

struct jv jv_cstr(struct jarena *a, const char *s) {
    return jv_str(a, s, strlen(s));
}

struct jv jv_list(struct jarena *a) {
    struct jlist *l = jarena_alloc(a, sizeof *l);
    return l ? (struct jv){.kind = JV_LIST, .u.l = l} : jv_undef();
}

struct jv jv_dict(struct jarena *a) {
    struct jdict *d = jarena_alloc(a, sizeof *d);
    return d ? (struct jv){.kind = JV_DICT, .u.d = d} : jv_undef();
}

/* Arena growth: copy to a doubled block (the old one is garbage until the render ends). */
static int grow(struct jarena *a, struct jv **items, size_t n, size_t *cap) {
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    struct jv *p = jarena_alloc(a, nc * sizeof *p);
    if (!p)
        return -1;
    if (n)
        memcpy(p, *items, n * sizeof *p);
    *items = p;
    *cap = nc;
    return 0;
}

int jv_list_push(struct jarena *a, struct jlist *l, struct jv v) {
    if (grow(a, &l->items, l->n, &l->cap))
        return -1;
    l->items[l->n++] = v;
    return 0;
}

struct jv *jv_dict_get(const struct jdict *d, struct jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], k))
            return &d->vals[i];
    return NULL;
}

struct jv *jv_dict_gets(const struct jdict *d, const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == JV_STR && d->keys[i].u.s->len == n &&
            memcmp(d->keys[i].u.s->p, k, n) == 0)
            return &d->vals[i];
    return NULL;
}

int jv_dict_set(struct jarena *a, struct jdict *d, struct jv k, struct jv v) {
    struct jv *slot = jv_dict_get(d, k);
    if (slot) {
        *slot = v;
        return 0;
    }
    size_t kc = d->cap;
    if (grow(a, &d->keys, d->n, &kc) || grow(a, &d->vals, d->n, &d->cap))
        return -1;
    d->keys[d->n] = k;
    d->vals[d->n++] = v;
    return 0;
}

static int is_num(struct jv v) {
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}
static double num(struct jv v) {
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
}

static int equal_d(struct jv a, struct jv b, int depth);

int jv_equal(struct jv a, struct jv b) {
    return equal_d(a, b, 0);
}

static int equal_d(struct jv a, struct jv b, int depth) {
    if (depth > JV_MAX_NEST)
        return 0;
    /* Identity first, as Python does; it also keeps shared sub-lists from costing 2^depth. */
    if (a.kind == b.kind && (a.kind == JV_LIST || a.kind == JV_DICT) && a.u.l == b.u.l)
        return 1;
    if (is_num(a) && is_num(b))
        return num(a) == num(b);
    if (a.kind != b.kind)
        return 0;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->p, b.u.s->p, a.u.s->len);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n)
            return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_d(a.u.l->items[i], b.u.l->items[i], depth + 1))
                return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n)
            return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jv *o = jv_dict_get(b.u.d, a.u.d->keys[i]);
            if (!o || !equal_d(a.u.d->vals[i], *o, depth + 1))
                return 0;
        }
        return 1;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
    }
}

static int compare_d(struct jv a, struct jv b, int *ok, int depth);

int jv_compare(struct jv a, struct jv b, int *ok) {
    return compare_d(a, b, ok, 0);
}

static int compare_d(struct jv a, struct jv b, int *ok, int depth) {
    *ok = depth <= JV_MAX_NEST;
    if (!*ok)
        return 0;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int r = memcmp(a.u.s->p, b.u.s->p, n);
        if (r)
            return r;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            int r = compare_d(a.u.l->items[i], b.u.l->items[i], ok, depth + 1);
            if (r || !*ok)
                return r;
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    *ok = 0;
    return 0;
}

/* Python's float repr: the shortest digits that read back exactly, written positionally when
 * the exponent is in [-4, 16) ("1000.0", "0.0001") and in e-notation otherwise ("1e+16"). */
int jv_fmt_float(struct jbuf *b, double f) {
    char s[64], digits[32], out[96];
    if (isnan(f))
        return jbuf_puts(b, "nan");
    if (isinf(f))
        return jbuf_puts(b, f < 0 ? "-inf" : "inf");
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*e", prec - 1, f);
        if (strtod(s, NULL) == f)
            break;
    }
    const char *p = s;
    int neg = *p == '-', nd = 0;
    p += neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exp = atoi(p + 1);
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp >= 16 || exp < -4) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, (size_t)nd - 1);
            o += (size_t)nd - 1;
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return jbuf_puts(b, out);
    }
    if (exp < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -exp - 1; i++)
            out[o++] = '0';
        memcpy(out + o, digits, (size_t)nd);
        o += (size_t)nd;
    } else {
        for (int i = 0; i <= exp; i++)
            out[o++] = i < nd ? digits[i] : '0';
        out[o++] = '.';
        if (nd > exp + 1) {
            memcpy(out + o, digits + exp + 1, (size_t)(nd - exp - 1));
            o += (size_t)(nd - exp - 1);
        } else
            out[o++] = '0';
    }
    out[o] = 0;
    return jbuf_puts(b, out);
}
