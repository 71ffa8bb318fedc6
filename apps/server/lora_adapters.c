/* lora_adapters.c: llama-server's GET /lora-adapters (the adapters given with --lora, each
 * with its id, file and scale) and POST /lora-adapters ([{"id": 0, "scale": 0.5}, ...]: new
 * scales, those left out at 0, for the requests from then on that name no adapters of their
 * own). */
#include <math.h>

#include "lora_adapters.h"
#include "state.h"

struct reply lora_adapters_list(struct state *s) {
    json_t *list = json_array();
    for (int i = 0; i < state_lora_count(s); i++) {
        float scale;
        const char *path = state_lora_info(s, i, &scale);
        json_array_append_new(list,
                              json_pack("{s:i, s:s, s:f}", "id", i, "path", path, "scale", scale));
    }
    return reply_json(list);
}

struct reply lora_adapters_set(struct state *s, json_t *body) {
    float scales[8] = {0};
    int n = state_lora_count(s);
    if (!json_is_array(body))
        return reply_error(400, "invalid_request_error", NULL,
                           "the body must be an array of {\"id\", \"scale\"}");
    size_t i;
    json_t *item;
    json_array_foreach(body, i, item) {
        json_t *id = json_object_get(item, "id"), *scale = json_object_get(item, "scale");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= n)
            return reply_error(400, "invalid_request_error", "id",
                               "each item's 'id' must be an adapter's (GET /lora-adapters)");
        double v = json_number_value(scale);
        if (!json_is_number(scale) || !isfinite(v) || fabs(v) > 100)
            return reply_error(400, "invalid_request_error", "scale",
                               "each item's 'scale' must be a number from -100 to 100");
        scales[json_integer_value(id)] = (float)v;
    }
    if (state_lora_set(s, scales) != OX_OK)
        return reply_error(500, "server_error", NULL, ox_last_error());
    return reply_json(json_pack("{s:b}", "success", 1));
}
