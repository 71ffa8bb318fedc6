/* vk_graph.c: decode steps recorded into a command buffer once and replayed (the op table's
 * graph_begin and graph_end): a step of a few tokens is a few hundred dispatches whose recording
 * costs the host more than a submission of the buffer that holds them. A step repeats exactly
 * for a key but for what it reads from device memory (positions, cells, the cells in use), so
 * its buffer is submitted again as it is. */
#include "backend/vulkan/vk_internal.h"

/* The graph recorded for key, where it may be replayed. */
static struct vk_graph *recorded(struct vk_state *s, uint64_t key) {
    for (int i = 0; i < VK_GRAPHS; i++) {
        struct vk_graph *g = &s->graph[i];
        if (g->valid && g->key == key && g->epoch == s->epoch)
            return g;
    }
    return NULL;
}

/* Where key's recording goes: an unused slot, else the one used longest ago (its command buffer
 * and fence made at the slot's first use; NULL, noted, where they cannot be). */
static struct vk_graph *slot(struct vk_state *s) {
    struct vk_graph *g = &s->graph[0];
    for (int i = 0; i < VK_GRAPHS && g->valid; i++)
        if (!s->graph[i].valid || s->graph[i].used < g->used)
            g = &s->graph[i];
    VkDevice dev = s->d->device;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = s->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (!g->cmd)
        vk_note(s, vkAllocateCommandBuffers(dev, &ai, &g->cmd), "vkAllocateCommandBuffers");
    if (g->cmd && !g->fence)
        vk_note(s, vkCreateFence(dev, &fi, NULL, &g->fence), "vkCreateFence");
    return g->cmd && g->fence ? g : NULL;
}

/* OX_VK_GRAPHS=0: every step recorded as it comes (to compare with). */
static bool graphs_wanted(void) {
    static int wanted = -1;
    if (wanted < 0)
        wanted = !vk_turned_off("OX_VK_GRAPHS");
    return wanted;
}

bool vk_graph_begin(struct backend *b, uint64_t key) {
    struct vk_state *s = vk_of(b);
    s->serial++; /* no product reuses bytes made before: a replay skips what made them */
    /* the profiler times each step's dispatches */
    if (s->err != OX_OK || s->prof || s->capture || !graphs_wanted())
        return false;
    vk_submit_recorded(s); /* the step's uploads, ahead of it */
    struct vk_graph *g = recorded(s, key);
    if (g) {
        vk_settle(s, g->fence, &g->in_flight); /* a command buffer is pending once at a time */
        g->in_flight = vk_queue_submit(s, g->cmd, g->fence, false);
        g->used = ++s->graph_clock;
        return g->in_flight;
    }
    if (!(g = slot(s)))
        return false;
    vk_settle(s, g->fence, &g->in_flight);
    g->valid = false, g->key = key, g->epoch = s->epoch;
    vkResetCommandBuffer(g->cmd, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult r = vkBeginCommandBuffer(g->cmd, &bi);
    vk_note(s, r, "vkBeginCommandBuffer");
    if (r != VK_SUCCESS)
        return false;
    s->cmd = g->cmd, s->recording = true, s->dispatches = 0;
    s->capture = g, s->capture_spoiled = false;
    return false;
}

/* The recording ended and submitted (it runs this step); kept for replays where whole. */
static void finish(struct vk_state *s, bool whole) {
    vk_record_waiting(s); /* the step's last dispatches are its own */
    struct vk_graph *g = s->capture;
    s->capture = NULL, s->recording = false, s->pending = false;
    g->in_flight = vk_queue_submit(s, g->cmd, g->fence, true);
    g->valid = whole && g->in_flight && !s->capture_spoiled && s->err == OX_OK;
    g->used = ++s->graph_clock;
    s->serial++;
}

void vk_graph_end(struct backend *b) {
    struct vk_state *s = vk_of(b);
    if (s->capture)
        finish(s, true);
}

void vk_graph_abort(struct vk_state *s) {
    finish(s, false);
}

void vk_graphs_settle(struct vk_state *s) {
    for (int i = 0; i < VK_GRAPHS; i++)
        vk_settle(s, s->graph[i].fence, &s->graph[i].in_flight);
}

void vk_graphs_release(struct vk_state *s) {
    for (int i = 0; i < VK_GRAPHS; i++)
        if (s->graph[i].fence)
            vkDestroyFence(s->d->device, s->graph[i].fence, NULL);
}
