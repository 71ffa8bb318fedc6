/* cpu_group.c: the ranks of a split model as threads of one process, each running the CPU
 * backend: their all_reduce calls meet at a barrier, each rank adds every rank's rows in rank
 * order into its own buffer (so all get the same floats), and a second barrier keeps the rows
 * until everyone has read them. A send leaves its rows in the receiver's mailbox (one message
 * at a time), which its recv empties. The waits are the group's own so that cpu_group_abort
 * can end them: a rank that will never come (its process gone) fails the others' calls. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"

enum { GROUP_CHUNK = 1 << 16 }; /* floats summed per meeting: a rank's buffer */

struct backend_group {
    int world;
    pthread_mutex_t mu;
    pthread_cond_t all_here;
    int arrived;
    uint64_t meeting; /* counts the barriers passed */
    bool aborted;
    float **rows; /* [world]: each rank's x of the current meeting */
    float *sums;  /* [world][GROUP_CHUNK] */
    pthread_cond_t mail;
    struct mailbox {
        float *rows;
        size_t n, cap;
        int from; /* -1: empty */
    } * box;      /* [world]: by receiver */
};

struct backend_group *backend_cpu_group_create(int world) {
    struct backend_group *g = calloc(1, sizeof *g);
    if (!g || world < 1 || !(g->rows = calloc((size_t)world, sizeof *g->rows)) ||
        !(g->sums = malloc((size_t)world * GROUP_CHUNK * sizeof *g->sums)) ||
        !(g->box = calloc((size_t)world, sizeof *g->box))) {
        if (g)
            free(g->rows), free(g->sums), free(g->box);
        free(g);
        ox_fail(OX_ERR_OOM, "cpu: out of memory for a group of %d ranks", world);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->all_here, NULL);
    pthread_cond_init(&g->mail, NULL);
    for (int r = 0; r < world; r++)
        g->box[r].from = -1;
    g->world = world;
    return g;
}

/* The backend's group_create: threads of the host, no devices. */
struct backend_group *cpu_group_create(int world, const int *devices) {
    (void)devices;
    return backend_cpu_group_create(world);
}

enum ox_status cpu_group_enter(struct backend_group *g, int rank) {
    return rank >= 0 && rank < g->world
               ? OX_OK
               : ox_fail(OX_ERR_INVALID_ARG, "cpu: no rank %d in a group of %d", rank, g->world);
}

int cpu_devices(void) {
    return 0;
}

void cpu_group_abort(struct backend_group *g) {
    pthread_mutex_lock(&g->mu);
    g->aborted = true;
    pthread_cond_broadcast(&g->all_here);
    pthread_cond_broadcast(&g->mail);
    pthread_mutex_unlock(&g->mu);
}

void backend_cpu_group_free(struct backend_group *g) {
    if (!g)
        return;
    pthread_cond_destroy(&g->all_here);
    pthread_cond_destroy(&g->mail);
    pthread_mutex_destroy(&g->mu);
    for (int r = 0; r < g->world; r++)
        free(g->box[r].rows);
    free(g->rows), free(g->sums), free(g->box), free(g);
}

/* Waits until every rank has come; false when the group was ended first. */
static bool meet(struct backend_group *g) {
    pthread_mutex_lock(&g->mu);
    uint64_t mine = g->meeting;
    if (!g->aborted && ++g->arrived == g->world) {
        g->arrived = 0, g->meeting++;
        pthread_cond_broadcast(&g->all_here);
    }
    while (g->meeting == mine && !g->aborted)
        pthread_cond_wait(&g->all_here, &g->mu);
    bool met = g->meeting != mine;
    pthread_mutex_unlock(&g->mu);
    return met;
}

enum ox_status cpu_all_reduce(struct backend *b, struct backend_group *g, int rank, float *x,
                              size_t n, float *to) {
    (void)b;
    float *sum = g->sums + (size_t)rank * GROUP_CHUNK;
    for (size_t at = 0; at < n; at += GROUP_CHUNK) {
        size_t len = n - at < GROUP_CHUNK ? n - at : GROUP_CHUNK;
        g->rows[rank] = x + at;
        if (!meet(g))
            return ox_fail(OX_ERR_IO, "cpu: the ranks' sums were ended: a rank is gone");
        memcpy(sum, g->rows[0], len * sizeof *sum);
        for (int r = 1; r < g->world; r++)
            for (size_t i = 0; i < len; i++)
                sum[i] += g->rows[r][i];
        if (!meet(g)) /* every rank has read every rank's rows */
            return ox_fail(OX_ERR_IO, "cpu: the ranks' sums were ended: a rank is gone");
        if (to)
            for (size_t i = 0; i < len; i++)
                to[at + i] += sum[i];
        else
            memcpy(x + at, sum, len * sizeof *sum);
    }
    return OX_OK;
}

static enum ox_status ended(void) {
    return ox_fail(OX_ERR_IO, "cpu: the ranks' hand-overs were ended: a rank is gone");
}

enum ox_status cpu_send(struct backend *b, struct backend_group *g, int rank, int to,
                        const float *x, size_t n) {
    (void)b;
    pthread_mutex_lock(&g->mu);
    struct mailbox *m = &g->box[to];
    while (m->from >= 0 && !g->aborted) /* the last message not taken yet */
        pthread_cond_wait(&g->mail, &g->mu);
    bool aborted = g->aborted;
    float *rows = n > m->cap && !aborted ? realloc(m->rows, n * sizeof *rows) : m->rows;
    bool ok = !aborted && (n <= m->cap || rows);
    if (ok) {
        m->rows = rows, m->cap = n > m->cap ? n : m->cap;
        memcpy(m->rows, x, n * sizeof *x);
        m->n = n, m->from = rank;
        pthread_cond_broadcast(&g->mail);
    }
    pthread_mutex_unlock(&g->mu);
    return ok ? OX_OK : aborted ? ended() : ox_fail(OX_ERR_OOM, "cpu: out of memory");
}

enum ox_status cpu_recv(struct backend *b, struct backend_group *g, int rank, int from, float *x,
                        size_t n) {
    (void)b;
    pthread_mutex_lock(&g->mu);
    struct mailbox *m = &g->box[rank];
    while (m->from != from && !g->aborted)
        pthread_cond_wait(&g->mail, &g->mu);
    bool aborted = g->aborted; /* read under the lock, as what was sent */
    size_t sent = m->n;
    bool ok = !aborted && sent == n;
    if (ok)
        memcpy(x, m->rows, n * sizeof *x);
    if (!aborted)
        m->from = -1, pthread_cond_broadcast(&g->mail);
    pthread_mutex_unlock(&g->mu);
    return ok        ? OX_OK
           : aborted ? ended()
                     : ox_fail(OX_ERR_INVALID_ARG, "cpu: rank %d sent %zu floats, not %zu", from,
                               sent, n);
}
