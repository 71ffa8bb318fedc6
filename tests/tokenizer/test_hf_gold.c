/* test_hf_gold.c: every shared vocabulary tokenizes a corpus of hard strings
 * (scripts, emoji, combining marks, whitespace runs, code, special-token look-alikes) to the
 * ids Hugging Face `tokenizers` gives (tests/tokenizer/hf: corpus.json, and gold-<name>.json
 * made by make_gold.py with each model's published tokenizer.json settings). No BOS; special
 * tokens written in the text match, as `tokenizers` matches its added tokens. */
#include "json/json.h"
#include "oxidize.h"
#include "test.h"

/* A case's text: the JSON string, decoded (it may hold NULs, so with its length). */
static int check_case(const struct ox_vocab *v, const char *name, struct jv text, struct jv ids) {
    size_t n = 0, cap = 4096;
    ox_token *got = malloc(cap * sizeof *got);
    enum ox_status st = ox_tokenize(v, text.u.s->p, text.u.s->len, got, cap, &n, false, true);
    bool same = st == OX_OK && n == ids.u.l->n;
    for (size_t i = 0; same && i < n; i++)
        same = ids.u.l->items[i].kind == JV_INT && got[i] == ids.u.l->items[i].u.i;
    if (!same) {
        fprintf(stderr, "  %s: %.60s\n    want:", name, text.u.s->p);
        for (size_t i = 0; i < ids.u.l->n && i < 24; i++)
            fprintf(stderr, " %lld", (long long)ids.u.l->items[i].u.i);
        fprintf(stderr, "\n    got: ");
        for (size_t i = 0; i < n && i < cap && i < 24; i++)
            fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
    free(got);
    return same;
}

static void check_gold(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/tokenizer/hf/gold-%s.json", OX_SOURCE_DIR, name);
    size_t len = 0;
    char *text = test_read_file(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    struct jarena *a = jarena_new((size_t)64 << 20);
    struct jv root;
    CHECK(jjson_parse(a, text, len, &root) == OX_OK && root.kind == JV_DICT);
    struct jv *vocab = jv_dict_gets(root.u.d, "vocab"), *cases = jv_dict_gets(root.u.d, "cases");
    CHECK(vocab && vocab->kind == JV_STR && cases && cases->kind == JV_LIST);
    struct ox_vocab *v = NULL;
    if (vocab && cases) {
        snprintf(path, sizeof path, "%s/vocab/%s", test_data_dir(), vocab->u.s->p);
        CHECK_MSG(ox_vocab_load(path, &v) == OX_OK, "%s: %s", path, ox_last_error());
    }
    int passed = 0, total = 0;
    for (size_t i = 0; v && i < cases->u.l->n; i++) {
        struct jv c = cases->u.l->items[i];
        struct jv *t = jv_dict_gets(c.u.d, "text"), *ids = jv_dict_gets(c.u.d, "ids");
        CHECK(t && t->kind == JV_STR && ids && ids->kind == JV_LIST);
        if (t && ids)
            passed += check_case(v, name, *t, *ids), total++;
    }
    printf("%-12s %d/%d equal to tokenizers\n", name, passed, total);
    CHECK_MSG(total > 0 && passed == total, "%s: %d of %d cases differ", name, total - passed,
              total);
    ox_vocab_free(v);
    jarena_free(a);
    free(text);
}

int main(void) {
    check_gold("qwen2");
    check_gold("llama-bpe");
    check_gold("gpt-2");
    check_gold("bert-bge");
    check_gold("llama-spm");
    check_gold("phi-3");
    check_gold("starcoder");
    check_gold("refact");
    check_gold("mpt");
    check_gold("falcon");
    check_gold("deepseek-llm");
    check_gold("deepseek-coder");
    return test_finish("test_hf_gold");
}
