/* test_chat_api.c: the public chat-template calls: messages given as structs reach the template
 * intact (quotes, newlines, control bytes, UTF-8), the snprintf rule, and errors. */
#include <stdlib.h>
#include <string.h>

#include "oxidize.h"
#include "test.h"

static const char *tmpl = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
                          "</{{ m.role }}>{% endfor %}{% if add_generation_prompt %}<assistant>"
                          "{% endif %}";

int main(void) {
    struct ox_chat_message msgs[] = {
        {"system", "Be \"brief\"\\n."},
        {"user", "line one\nline two\ttab \x01 \xc3\xa9 \xe2\x9c\x93"}};
    char buf[512];
    size_t len = 0;
    CHECK_EQ(ox_chat_apply_template(NULL, tmpl, msgs, 2, true, NULL, buf, sizeof buf, &len), OX_OK);
    const char *want = "<system>Be \"brief\"\\n.</system><user>line one\nline two\ttab \x01 "
                       "\xc3\xa9 \xe2\x9c\x93</user><assistant>";
    CHECK(len == strlen(want) && memcmp(buf, want, len) == 0);
    /* snprintf rule: a short buffer gets a prefix, len the full size */
    size_t short_len = 0;
    CHECK_EQ(ox_chat_apply_template(NULL, tmpl, msgs, 2, false, NULL, buf, 8, &short_len), OX_OK);
    CHECK(short_len == len - strlen("<assistant>") && memcmp(buf, want, 8) == 0);
    /* the length alone: no buffer at all */
    size_t need = 0;
    CHECK_EQ(ox_chat_apply_template(NULL, tmpl, msgs, 2, true, NULL, NULL, 0, &need), OX_OK);
    CHECK(need == len);
    /* the JSON form with special tokens and a pinned clock */
    char *out = NULL;
    CHECK_EQ(ox_chat_render_json("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"
                                 "{{ strftime_now('%Y-%m-%d') }}",
                                 "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL, true, "<s>",
                                 "</s>", 1768473000, &out, &len),
             OX_OK);
    CHECK(out && !strcmp(out, "<s>hi</s>2026-01-15"));
    free(out);
    /* errors: a template that raises, one that does not parse, bad JSON, missing arguments */
    out = NULL;
    CHECK(ox_chat_render_json("{{ raise_exception('no system role') }}", "[]", NULL, true, NULL,
                              NULL, 0, &out, &len) != OX_OK);
    CHECK(strstr(ox_last_error(), "no system role") != NULL && out == NULL);
    CHECK(ox_chat_render_json("{% if %}", "[]", NULL, true, NULL, NULL, 0, &out, &len) != OX_OK);
    CHECK(ox_chat_render_json("x", "[{", NULL, true, NULL, NULL, 0, &out, &len) != OX_OK);
    CHECK_EQ(ox_chat_apply_template(NULL, NULL, msgs, 2, true, NULL, buf, sizeof buf, &len),
             OX_ERR_INVALID_ARG);
    return test_finish("test_chat_api");
}
