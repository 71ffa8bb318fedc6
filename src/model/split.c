/* split.c: a model split over ranks by rows: which GPUs the parameters ask for, the ranks'
 * threads (one each but rank 0, which is the caller's: a GPU rank's thread keeps its device
 * current) and the calls run on all of them, the shards they hold, and the contexts over them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/pipeline.h"
#include "model/shard.h"
#include "model/split.h"

struct rank_thread {
    struct split_workers *w;
    int rank; /* local */
};

/* Local ranks 1 .. n_local - 1 wait for a call (gen moves on), run it and count down pending; run
 * serializes the calls, so that two contexts of one model never interleave theirs. */
struct split_workers {
    pthread_t thread[SPLIT_MAX];
    struct rank_thread arg[SPLIT_MAX];
    int started;
    pthread_mutex_t mu, run;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending;
    bool quit;
    split_fn fn;
    void *user;
    struct model_split *sp;
    enum ox_status st[SPLIT_MAX];
    char error[SPLIT_MAX][256];
};

/* fn on local rank i's device (its rank first + i); a failure's message kept for the caller. */
static void run_rank(struct split_workers *w, int i, split_fn fn, void *user) {
    struct model_split *sp = w->sp;
    enum ox_status st = sp->ops->group_enter(sp->group, sp->first + i);
    if (st == OX_OK)
        st = fn(sp->first + i, user);
    w->st[i] = st;
    if (st != OX_OK)
        snprintf(w->error[i], sizeof w->error[i], "%s", ox_last_error());
}

static void *rank_main(void *arg) {
    struct split_workers *w = ((struct rank_thread *)arg)->w;
    int rank = ((struct rank_thread *)arg)->rank;
    uint64_t seen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->gen == seen && !w->quit)
            pthread_cond_wait(&w->go, &w->mu);
        if (w->quit)
            break;
        seen = w->gen;
        split_fn fn = w->fn;
        void *user = w->user;
        pthread_mutex_unlock(&w->mu);
        run_rank(w, rank, fn, user);
        pthread_mutex_lock(&w->mu);
        if (--w->pending == 0)
            pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

enum ox_status split_run(struct model_split *sp, split_fn fn, void *user) {
    struct split_workers *w = sp->workers;
    pthread_mutex_lock(&w->run);
    pthread_mutex_lock(&w->mu);
    w->fn = fn, w->user = user, w->pending = sp->n_local - 1, w->gen++;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    int device = sp->ops->device_get ? sp->ops->device_get() : 0; /* the caller's, kept */
    run_rank(w, 0, fn, user);
    if (sp->ops->device_set)
        sp->ops->device_set(device);
    pthread_mutex_lock(&w->mu);
    while (w->pending > 0)
        pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
    enum ox_status st = OX_OK;
    for (int i = 0; i < sp->n_local && st == OX_OK; i++)
        if (w->st[i] != OX_OK)
            st = ox_fail(w->st[i], "rank %d of %d: %s", sp->first + i, sp->world, w->error[i]);
    pthread_mutex_unlock(&w->run);
    return st;
}

static void stop_workers(struct split_workers *w) {
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    for (int r = 1; r <= w->started; r++)
        pthread_join(w->thread[r], NULL);
    pthread_cond_destroy(&w->go), pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->mu), pthread_mutex_destroy(&w->run);
    free(w);
}

static enum ox_status start_workers(struct model_split *sp) {
    struct split_workers *w = calloc(1, sizeof *w);
    if (!w)
        return ox_fail(OX_ERR_OOM, "split: out of memory");
    pthread_mutex_init(&w->mu, NULL), pthread_mutex_init(&w->run, NULL);
    pthread_cond_init(&w->go, NULL), pthread_cond_init(&w->done, NULL);
    w->sp = sp;
    sp->workers = w;
    for (int r = 1; r < sp->n_local; r++) {
        w->arg[r] = (struct rank_thread){w, r};
        if (pthread_create(&w->thread[r], NULL, rank_main, &w->arg[r]) != 0)
            return ox_fail(OX_ERR_OOM, "split: cannot start rank %d's thread", r);
        w->started = r;
    }
    return OX_OK;
}

/* ---- watching the other processes ------------------------------------------------------ */

struct split_watch {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t go;
    uint64_t call; /* counts the calls begun: a look at the connections belongs to one */
    bool on, quit;
};

/* Looks at the other processes' connections in slices of 50 ms while a call is on; the first
 * that is gone ends the group. */
static void *watch_main(void *arg) {
    struct model_split *sp = arg;
    struct split_watch *w = sp->watch;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->on && !w->quit)
            pthread_cond_wait(&w->go, &w->mu);
        if (w->quit)
            break;
        uint64_t call = w->call, ready = 0;
        int lost = -1;
        while (w->on && w->call == call && lost < 0) {
            pthread_mutex_unlock(&w->mu);
            bool gone = dist_peer_lost(sp->dist, 50, &ready, &lost);
            pthread_mutex_lock(&w->mu);
            if (gone && w->on && w->call == call) { /* not the next call's bytes arriving */
                ox_log(OX_LOG_ERROR, "split: rank %d is gone: ending the group", lost);
                split_break(sp);
            }
            lost = gone && w->on && w->call == call ? lost : -1;
        }
        if (lost >= 0) /* the group is over: nothing more to watch */
            w->on = false;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void split_break(struct model_split *sp) {
    if (__atomic_exchange_n(&sp->broken, true, __ATOMIC_ACQ_REL))
        return;
    sp->ops->group_abort(sp->group);
    dist_shutdown(sp->dist);
}

bool split_fails_alone(const struct split_call *c, enum ox_status st) {
    return st != OX_OK && (c->kind == SPLIT_DECODE || c->kind == SPLIT_EMBED) &&
           st != OX_ERR_INVALID_ARG && st != OX_ERR_CONTEXT_FULL;
}

void split_watch_begin(struct model_split *sp) {
    struct split_watch *w = sp->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->on = true, w->call++;
    pthread_cond_signal(&w->go);
    pthread_mutex_unlock(&w->mu);
}

void split_watch_end(struct model_split *sp) {
    struct split_watch *w = sp->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->on = false;
    pthread_mutex_unlock(&w->mu);
}

static enum ox_status start_watch(struct model_split *sp) {
    struct split_watch *w = calloc(1, sizeof *w);
    if (!w)
        return ox_fail(OX_ERR_OOM, "split: out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->go, NULL);
    sp->watch = w;
    if (pthread_create(&w->thread, NULL, watch_main, sp) != 0) {
        pthread_cond_destroy(&w->go), pthread_mutex_destroy(&w->mu);
        free(w);
        sp->watch = NULL;
        return ox_fail(OX_ERR_OOM, "split: cannot start the watching thread");
    }
    return OX_OK;
}

static void stop_watch(struct model_split *sp) {
    struct split_watch *w = sp->watch;
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_signal(&w->go);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->go), pthread_mutex_destroy(&w->mu);
    free(w);
    sp->watch = NULL;
}

/* ---- which GPUs ------------------------------------------------------------------------ */

/* The GPUs tensor_split gives a share (all when it gives none), main_gpu first, into the plan
 * with their shares; an error for shares past the GPUs present or none for main_gpu. */
static enum ox_status plan_devices(const struct ox_model_params *p, int gpus,
                                   struct split_plan *plan) {
    bool any = false;
    for (int i = 0; i < OX_MAX_DEVICES; i++) {
        float s = p->tensor_split[i];
        if (s > 0.0f && i >= gpus)
            return ox_fail(OX_ERR_INVALID_ARG,
                           "model: tensor_split gives GPU %d the share %g, but there are %d GPUs",
                           i, (double)s, gpus);
        any |= s > 0.0f;
    }
    float share = any ? p->tensor_split[p->main_gpu] : 1.0f;
    if (!(share > 0.0f))
        return ox_fail(OX_ERR_INVALID_ARG, "model: tensor_split gives main_gpu %d no share",
                       p->main_gpu);
    int n = 0;
    plan->device[n] = p->main_gpu, plan->share[n++] = share;
    for (int i = 0; i < gpus && i < OX_MAX_DEVICES; i++) {
        float s = any ? p->tensor_split[i] : 1.0f;
        if (s > 0.0f && i != p->main_gpu)
            plan->device[n] = i, plan->share[n++] = s;
    }
    plan->world = n;
    return OX_OK;
}

/* OX_SPLIT_AUTO (the default) on several GPUs, by measurement (two H100s, bench/RESULTS.md
 * sessions 13 and 19): by rows wherever a dense model splits so in the shares asked for (its
 * prompts 1.2-1.6x one GPU's, its decode 1.10-1.59x at one sequence, 0.96-1.52x at 8 to 128),
 * else by layers (as fast as one GPU within 5%, and a model larger than one fits; one that cannot
 * split so runs on GPU 0): experts and latent attention, which split by rows too, have not been
 * measured so. One GPU, no GPU, or layers left to the CPU: none. */
int split_auto_mode(const struct ox_model *m, const struct ox_model_params *p, int gpus) {
    if (p->split_mode != OX_SPLIT_AUTO)
        return p->split_mode;
    int32_t ngl = p->n_gpu_layers;
    struct split_plan plan;
    if (gpus < 2 || ngl == 0 || (ngl > 0 && ngl < m->cfg.n_layer) || p->main_gpu < 0 ||
        p->main_gpu >= gpus || plan_devices(p, gpus, &plan) != OX_OK || plan.world < 2)
        return OX_SPLIT_NONE; /* (bad shares are refused when the plan is made) */
    return split_rows_by_default(m, plan.world, plan.share) ? OX_SPLIT_ROW : OX_SPLIT_LAYER;
}

bool split_rows_by_default(const struct ox_model *m, int world, const float *share) {
    return !m->cfg.n_expert && !m->cfg.arch->mla && !model_shard_refusal(m, world, share);
}

enum ox_status split_devices(const struct ox_model_params *p, const struct backend_ops *gpu,
                             int n_layer, struct split_plan *plan) {
    *plan = (struct split_plan){.mode = p->split_mode};
    if (p->split_mode < OX_SPLIT_NONE || p->split_mode > OX_SPLIT_ROW)
        return ox_fail(OX_ERR_INVALID_ARG, "model: split_mode %d (0 none, 1 layer, 2 row)",
                       p->split_mode);
    for (int i = 0; i < OX_MAX_DEVICES; i++)
        if (!(p->tensor_split[i] >= 0.0f) || !isfinite(p->tensor_split[i]))
            return ox_fail(OX_ERR_INVALID_ARG, "model: tensor_split gives GPU %d the share %g", i,
                           (double)p->tensor_split[i]);
    int gpus = gpu && gpu->devices && gpu->available() ? gpu->devices() : 0;
    if (p->main_gpu < 0 || p->main_gpu >= (gpus > 1 ? gpus : 1))
        return ox_fail(OX_ERR_INVALID_ARG, "model: main_gpu %d, but there are %d GPUs", p->main_gpu,
                       gpus);
    if (p->split_mode == OX_SPLIT_NONE || p->n_gpu_layers == 0 || gpus < 2)
        return p->main_gpu == 0 ? OX_OK
                                : ox_fail(OX_ERR_UNSUPPORTED,
                                          "model: one GPU runs the model on GPU 0 (main_gpu %d "
                                          "takes split_mode row or layer)",
                                          p->main_gpu);
    bool partial = p->n_gpu_layers > 0 && p->n_gpu_layers < n_layer;
    if (partial && p->split_mode == OX_SPLIT_ROW)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "model: split_mode row runs every layer on the GPUs, but n_gpu_layers %d "
                       "of %d leaves some to the CPU (split_mode layer can)",
                       p->n_gpu_layers, n_layer);
    OX_TRY(plan_devices(p, gpus, plan));
    if (plan->world == 1)
        plan->world = 0; /* one GPU: no split */
    if (partial && plan->world > p->n_gpu_layers)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "model: n_gpu_layers %d is fewer than the %d GPUs "
                       "the layers split over",
                       p->n_gpu_layers, plan->world);
    plan->cpu_layers = partial ? n_layer - p->n_gpu_layers : 0;
    return OX_OK;
}

/* ---- the shards ------------------------------------------------------------------------ */

static enum ox_status make_shard(int rank, void *user) {
    struct ox_model *m = user;
    struct model_split *sp = m->split;
    struct ox_model **out = &sp->shard[rank - sp->first];
    if (sp->mode == OX_SPLIT_LAYER)
        return model_layer_shard(m, rank, sp->world, sp->layer_begin[rank],
                                 rank == 0 ? sp->cpu_layers : sp->layer_begin[rank],
                                 sp->layer_begin[rank + 1], sp->ops->device, out);
    return model_shard(m, rank, sp->world, sp->share, sp->ops->device, out);
}

static enum ox_status free_shard(int rank, void *user) {
    struct model_split *sp = user;
    ox_model_free(sp->shard[rank - sp->first]);
    sp->shard[rank - sp->first] = NULL;
    return OX_OK;
}

/* A split of m as the plan says, n_local of its ranks here from first on (local rank i on
 * device devices[i]), into m->split, its group still to make. By layers, rank r's run from
 * layer_begin[r]: rank 0's CPU layers first, then the GPUs' in proportion to the shares
 * (rounded to the nearest layer, at least one each). */
static struct model_split *split_new(struct ox_model *m, const struct backend_ops *ops,
                                     const struct split_plan *plan, int first, int n_local,
                                     const int *devices) {
    struct model_split *sp = calloc(1, sizeof *sp);
    if (!sp) {
        ox_fail(OX_ERR_OOM, "model: out of memory");
        return NULL;
    }
    sp->world = plan->world, sp->first = first, sp->n_local = n_local, sp->ops = ops;
    sp->mode = plan->mode == OX_SPLIT_LAYER ? OX_SPLIT_LAYER : OX_SPLIT_ROW;
    pthread_mutex_init(&sp->calls, NULL);
    for (int i = 0; i < n_local; i++)
        sp->device[i] = devices ? devices[i] : i;
    double total = 0, sum = 0; /* (layer_begin[0] is 0: calloc) */
    for (int r = 0; r < plan->world; r++)
        total += sp->share[r] = plan->share[r] > 0 ? plan->share[r] : 1.0f;
    sp->cpu_layers = plan->cpu_layers;
    int32_t gpu_layers = m->cfg.n_layer - sp->cpu_layers;
    int32_t before = 0; /* GPU layers of the ranks before r */
    for (int r = 1; r <= plan->world; r++) {
        sum += sp->share[r - 1];
        int32_t at = (int32_t)(gpu_layers * (sum / total) + 0.5);
        int32_t least = before + 1, most = gpu_layers - (plan->world - r);
        if (gpu_layers >= plan->world) /* every rank one layer at least, where there are enough */
            at = at > most ? most : at < least ? least : at;
        sp->layer_begin[r] = sp->cpu_layers + at;
        before = at;
    }
    m->split = sp;
    return sp;
}

/* The ranks' threads, then each local rank's shard on its device. */
static enum ox_status start(struct ox_model *m) {
    enum ox_status st = start_workers(m->split);
    if (st == OX_OK)
        st = split_run(m->split, make_shard, m);
    if (st != OX_OK)
        model_split_free(m);
    return st;
}

enum ox_status model_split(struct ox_model *m, const struct backend_ops *ops,
                           const struct split_plan *plan) {
    int world = plan->world;
    if (world < 2 || world > SPLIT_MAX || !ops->group_create)
        return ox_fail(OX_ERR_INVALID_ARG, "model: a split over %d ranks of the %s", world,
                       ops->name);
    struct model_split *sp = split_new(m, ops, plan, 0, world, plan->device);
    if (!sp)
        return OX_ERR_OOM;
    sp->group = ops->group_create(world, ops->device ? sp->device : NULL);
    if (!sp->group) {
        enum ox_status st = ox_fail(OX_ERR_DEVICE, "%s", ox_last_error());
        model_split_free(m);
        return st;
    }
    return start(m);
}

/* What every rank's model must agree on to join: its size and shape. */
static uint64_t model_key(const struct ox_model *m) {
    const struct model_config *c = &m->cfg;
    uint64_t k = m->n_params * 0x9E3779B97F4A7C15ull;
    const int64_t v[] = {c->n_layer, c->n_embd,  c->n_head,         c->n_head_kv,
                         c->n_ff,    c->n_vocab, m->gguf->n_tensors};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        k = (k ^ (uint64_t)v[i]) * 0x100000001B3ull;
    return k;
}

enum ox_status model_split_join(struct ox_model *m, const struct backend_ops *ops,
                                struct backend_group *group, const struct dist_params *dp,
                                int device, int mode) {
    if (dp->world < 2 || dp->world > SPLIT_MAX || dp->rank < 0 || dp->rank >= dp->world)
        return ox_fail(OX_ERR_INVALID_ARG, "model: rank %d of %d ranks (2 to %d)", dp->rank,
                       dp->world, SPLIT_MAX);
    if (!group && !ops->group_join)
        return ox_fail(OX_ERR_UNSUPPORTED, "model: a split across processes sums through "
                                           "NCCL: it takes GPUs and a build with NCCL");
    uint8_t id[GROUP_ID_MAX] = {0};
    size_t id_len = 0;
    if (!group) /* NCCL's unique id: rank 0 makes it, the others get it when they join */
        OX_TRY(ops->group_id(dp->rank == 0, id, &id_len));
    struct split_plan plan = {.mode = mode, .world = dp->world}; /* equal shares */
    struct model_split *sp = split_new(m, ops, &plan, dp->rank, 1, &device);
    if (!sp)
        return OX_ERR_OOM;
    struct dist_params p = *dp;
    p.key = model_key(m);
    enum ox_status st = dist_join(&p, id, id_len, &sp->dist);
    if (st == OX_OK && group)
        sp->group = group, sp->group_borrowed = true;
    else if (st == OX_OK && !(sp->group = ops->group_join(dp->world, dp->rank, device, id)))
        st = ox_fail(OX_ERR_DEVICE, "%s", ox_last_error());
    if (st == OX_OK)
        st = start_watch(sp);
    if (st != OX_OK) {
        model_split_free(m);
        return st;
    }
    return start(m);
}

void model_split_free(struct ox_model *m) {
    struct model_split *sp = m->split;
    if (!sp)
        return;
    if (sp->workers && sp->workers->started == sp->n_local - 1)
        split_run(sp, free_shard, sp); /* each on its device */
    for (int i = 0; i < sp->n_local; i++)
        ox_model_free(sp->shard[i]); /* those left by a failed start */
    if (sp->workers)
        stop_workers(sp->workers);
    stop_watch(sp);
    dist_leave(sp->dist); /* rank 0 tells the others the group ends */
    if (sp->group && !sp->group_borrowed)
        sp->ops->group_free(sp->group);
    pthread_mutex_destroy(&sp->calls);
    split_wire_free(&sp->wire);
    free(sp->answers);
    free(sp);
    m->split = NULL;
}

/* ---- contexts -------------------------------------------------------------------------- */

static void release_number(struct model_split *sp, uint32_t id) {
    pthread_mutex_lock(&sp->calls);
    if (id < SPLIT_CONTEXTS)
        sp->used[id / 64] &= ~(1ull << (id % 64));
    pthread_mutex_unlock(&sp->calls);
}

enum ox_status split_context_create(const struct ox_model *m, const struct ox_context_params *p,
                                    struct ox_context **out) {
    struct model_split *sp = m->split;
    if (sp->first != 0)
        return ox_fail(OX_ERR_INVALID_ARG,
                       "context: rank %d of a split model follows rank 0's "
                       "contexts (ox_model_follow)",
                       sp->first);
    struct split_call c = {.kind = SPLIT_CREATE,
                           .ctx = SPLIT_CONTEXTS,
                           .params = p ? *p : ox_context_params_default()};
    pthread_mutex_lock(&sp->calls); /* the lowest number free */
    for (uint32_t i = 0; i < SPLIT_CONTEXTS && c.ctx == SPLIT_CONTEXTS; i++)
        if (!(sp->used[i / 64] >> (i % 64) & 1))
            c.ctx = i, sp->used[i / 64] |= 1ull << (i % 64);
    pthread_mutex_unlock(&sp->calls);
    struct split_context *sc = c.ctx < SPLIT_CONTEXTS ? calloc(1, sizeof *sc) : NULL;
    if (!sc) {
        release_number(sp, c.ctx);
        return ox_fail(OX_ERR_OOM, "context: out of memory, or %d contexts of the model already",
                       SPLIT_CONTEXTS);
    }
    enum ox_status st = split_call_run(sp, sc->rank, &c);
    if (st != OX_OK) { /* the ranks that made theirs free them; the first failure is said */
        char why[512];
        snprintf(why, sizeof why, "%s", ox_last_error());
        c.kind = SPLIT_FREE;
        split_call_run(sp, sc->rank, &c);
        release_number(sp, c.ctx);
        free(sc);
        return ox_fail(st, "%s", why);
    }
    sc->sp = sp, sc->model = m, sc->id = c.ctx;
    sc->rank[0]->split = sc;
    *out = sc->rank[0];
    return OX_OK;
}

void split_context_free(struct ox_context *ctx) {
    struct split_context *sc = ctx->split;
    struct split_call c = {.kind = SPLIT_FREE, .ctx = sc->id};
    ctx->split = NULL; /* rank 0's frees as a whole model's context */
    split_call_run(sc->sp, sc->rank, &c);
    release_number(sc->sp, sc->id);
    free(sc);
}

/* ---- following rank 0 ------------------------------------------------------------------ */

/* One call of rank 0's on this process's rank (its context by number in contexts), answered;
 * room the call's arrays and the answer take, kept for the next. */
static enum ox_status follow_one(struct model_split *sp, struct ox_context **contexts,
                                 const uint8_t *msg, size_t len, struct split_wire_room *room) {
    struct split_call c;
    int rank = sp->first;
    enum ox_status st = split_wire_read_call(msg, len, &c, room);
    uint8_t *part = NULL;
    float *out = NULL;
    if (st == OX_OK && c.ctx >= SPLIT_CONTEXTS)
        st = ox_fail(OX_ERR_INVALID_ARG, "split: context %u of rank 0's is past %d", c.ctx,
                     SPLIT_CONTEXTS);
    if (st == OX_OK) { /* this rank's results where split_apply puts them */
        c.size[rank] = c.size[0], c.at[rank] = 0;
        if (c.kind == SPLIT_SAVE && !(c.buf = part = malloc(c.size[rank] ? c.size[rank] : 1)))
            st = ox_fail(OX_ERR_OOM, "split: no memory for a state of %zu bytes", c.size[rank]);
        size_t width = (size_t)sp->shard[0]->cfg.n_embd + (size_t)ox_model_n_cls_out(sp->shard[0]);
        if (c.kind == SPLIT_EMBED && !(c.out[rank] = out = malloc(width * sizeof *out)))
            st = ox_fail(OX_ERR_OOM, "split: out of memory");
    }
    if (st == OX_OK)
        st = sp->ops->group_enter(sp->group, rank);
    bool ran = st == OX_OK;
    if (ran) {
        split_watch_begin(sp); /* rank 0 going mid-call ends the sums that wait for it */
        st = split_apply(&contexts[c.ctx], sp->shard[0], sp->group, rank, &c);
        split_watch_end(sp);
    }
    /* a call not even begun here, or failed where rank 0 may wait in its sums: rank 0 must
     * hear that this rank is out, not wait for it */
    if ((!ran && st != OX_OK) || split_fails_alone(&c, st))
        split_break(sp);
    size_t n;
    const uint8_t *answer = split_wire_answer(st, ox_last_error(), c.size[rank], part,
                                              st == OX_OK && part ? c.size[rank] : 0, room, &n);
    free(part), free(out);
    return answer ? dist_reply(sp->dist, answer, n)
                  : ox_fail(OX_ERR_OOM, "split: out of memory for an answer");
}

enum ox_status split_follow(struct ox_model *m) {
    return split_follow_calls(m, -1);
}

enum ox_status split_follow_calls(struct ox_model *m, int calls) {
    struct model_split *sp = m->split;
    if (!sp || !sp->dist || sp->first == 0)
        return ox_fail(OX_ERR_INVALID_ARG, "split: only a rank other than 0 of a model split "
                                           "across processes follows rank 0");
    struct ox_context **contexts = calloc(SPLIT_CONTEXTS, sizeof *contexts);
    struct split_wire_room room = {0};
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    enum ox_status st = contexts ? OX_OK : ox_fail(OX_ERR_OOM, "split: out of memory");
    while (st == OX_OK && !sp->broken) {
        st = dist_recv_grow(sp->dist, &buf, &cap, DIST_RECV_MAX, &len, -1);
        if (st == OX_OK && calls-- == 0)
            break; /* leaves with the call unanswered */
        if (st == OX_OK)
            st = follow_one(sp, contexts, buf, len, &room);
    }
    if (st == OX_ERR_ABORTED) /* rank 0 ended the group: done */
        st = OX_OK;
    else if (st == OX_OK && sp->broken)
        st = ox_fail(OX_ERR_IO, "split: the group ended in the middle of a call (a rank was "
                                "lost, or this one failed)");
    for (int i = 0; contexts && i < SPLIT_CONTEXTS; i++)
        ox_context_free(contexts[i]);
    free(contexts), free(buf);
    split_wire_free(&room);
    return st;
}
