/* test_json.c: unit tests of the json module, which reads and writes JSON as Python does.
 * Parsing (escapes, numbers, errors, limits) and writing as json.dumps (separators, indent,
 * sort_keys, ensure_ascii, floats). */
#include "json/json.h"
#include "test.h"

/* Parse text and write it back with indent and flags; returns the JSON (static) or
 * "ERR: message" (parse) / "ERR: dump" (write). */
static const char *roundtrip(const char *text, int indent, int flags) {
    static char result[4096];
    struct jarena *a = jarena_new(1 << 20);
    struct jbuf b = {0};
    struct jv v;
    if (jjson_parse(a, text, strlen(text), &v) != OX_OK)
        snprintf(result, sizeof result, "ERR: %s", ox_last_error());
    else if (jv_to_json(&b, v, indent, 0, flags))
        snprintf(result, sizeof result, "ERR: dump");
    else
        snprintf(result, sizeof result, "%s", b.p);
    free(b.p);
    jarena_free(a);
    return result;
}

#define RT(text, want) CHECK_STR(roundtrip(text, -1, 0), want)

static void test_values(void) {
    RT("{\"a\": [1, -2, 2.5, true, false, null], \"b\": {}, \"c\": []}",
       "{\"a\": [1, -2, 2.5, true, false, null], \"b\": {}, \"c\": []}");
    RT(" \t\n[1,2] \r\n", "[1, 2]");
    RT("{\"k\": 1, \"k\": 2}", "{\"k\": 2}"); /* the last duplicate wins, as in Python */
    RT("\"q\\\" b\\\\ s\\/ \\n\\t\\r\\b\\f\"", "\"q\\\" b\\\\ s/ \\n\\t\\r\\b\\f\"");
    RT("\"\\u0001\"", "\"\\u0001\"");
    /* Floats as Python's repr: shortest round-trip digits, e-notation outside [1e-4, 1e16). */
    RT("[1.0, 0.1, 1e16, 1e15, 0.0001, 0.00001, -0.5, 1.5e300]",
       "[1.0, 0.1, 1e+16, 1000000000000000.0, 0.0001, 1e-05, -0.5, 1.5e+300]");
    RT("9223372036854775807", "9223372036854775807");
}

static void test_unicode(void) {
    /* \u escapes (with surrogate pairs) decode to UTF-8; written back as-is, or escaped with
     * ensure_ascii. */
    RT("\"caf\\u00e9 \\ud83d\\ude00\"", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
    CHECK_STR(roundtrip("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", -1, JSON_ASCII),
              "\"caf\\u00e9 \\ud83d\\ude00\"");
}

static void test_layout(void) {
    /* json.dumps(indent=2, sort_keys=True): "," between items, ": " after keys. */
    CHECK_STR(roundtrip("{\"b\": 1, \"a\": [1, {}]}", 2, JSON_SORT_KEYS),
              "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": 1\n}");
    CHECK_STR(roundtrip("{\"b\": 1, \"a\": 2}", -1, 0), "{\"b\": 1, \"a\": 2}");
}

static void test_errors(void) {
    CHECK_STR(roundtrip("[1, 2", -1, 0), "ERR: json: expected ',' or ']' at byte 5");
    CHECK_STR(roundtrip("1 2", -1, 0), "ERR: json: trailing characters at byte 2");
    CHECK_STR(roundtrip("{1: 2}", -1, 0), "ERR: json: expected a string key at byte 1");
    /* A string's errors are at its start (after the quote). */
    CHECK_STR(roundtrip("\"a\\x\"", -1, 0), "ERR: json: bad escape at byte 1");
    CHECK_STR(roundtrip("", -1, 0), "ERR: json: unexpected end at byte 0");
    /* Nesting is bounded, so a hostile document cannot exhaust the stack. */
    char deep[1200];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    CHECK(strstr(roundtrip(deep, -1, 0), "nesting too deep") != NULL);
    /* The arena's cap bounds memory: past it the parse fails instead of growing. */
    struct jarena *a = jarena_new(1000);
    struct jv v;
    CHECK_EQ(jjson_parse(a, "[1]", 3, &v), OX_ERR_FORMAT);
    CHECK(strstr(ox_last_error(), "out of memory") != NULL);
    CHECK_EQ(v.kind, JV_UNDEF);
    jarena_free(a);
    /* json.dumps refuses Jinja's Undefined. */
    struct jbuf b = {0};
    CHECK(jv_to_json(&b, jv_undef(), -1, 0, 0) != 0);
    free(b.p);
}

int main(void) {
    test_values();
    test_unicode();
    test_layout();
    test_errors();
    return test_finish("test_json");
}
