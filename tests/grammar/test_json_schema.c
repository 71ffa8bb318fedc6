/* test_json_schema.c: JSON Schema -> GBNF: for a table of schemas, instances that must match
 * the generated grammar and instances that must not; integer ranges checked exhaustively; bad
 * schemas refused with OX_ERR_FORMAT; every grammar also accepted by ox_sampler_add_grammar. */
#define _POSIX_C_SOURCE 200809L
#include "grammar/grammar.h"
#include "oxidize.h"
#include "test.h"

/* Schemas and instances are written with ' for " (none of them needs a real '). */
static char *dq(const char *s) {
    char *t = strdup(s);
    for (char *p = t; *p; p++)
        if (*p == '\'')
            *p = '"';
    return t;
}

static struct ox_vocab *vocab; /* for the ox_sampler_add_grammar round trip; may be NULL */

/* Convert (schema already in real JSON) and parse; NULL on failure (reported). */
static struct gram *convert(const char *schema, char **text) {
    size_t len = 0;
    *text = NULL;
    enum ox_status st = ox_json_schema_to_grammar(schema, strlen(schema), text, &len);
    CHECK_MSG(st == OX_OK, "%s: %s", schema, ox_last_error());
    if (st != OX_OK)
        return NULL;
    CHECK_EQ(len, strlen(*text));
    struct gram *g = NULL;
    CHECK_MSG(gram_parse(*text, len, &g) == OX_OK, "%s: %s\n%s", schema, ox_last_error(), *text);
    if (vocab) {
        struct ox_sampler *s = NULL;
        CHECK_EQ(ox_sampler_create(&s), OX_OK);
        CHECK_MSG(ox_sampler_add_grammar(s, vocab, *text, len) == OX_OK, "%s", ox_last_error());
        ox_sampler_free(s);
    }
    return g;
}

/* The whole text is a sentence of the grammar. */
static bool matches(const struct gram *g, const char *text) {
    struct gram_state *s = NULL;
    bool ok = false;
    size_t n_ok = 0;
    if (gram_state_create(g, &s) != OX_OK)
        return false;
    enum ox_status st = gram_state_accept(s, text, strlen(text), &ok, &n_ok);
    CHECK_MSG(st == OX_OK, "%s", ox_last_error());
    ok = ok && st == OX_OK && gram_state_can_end(s);
    gram_state_free(s);
    return ok;
}

struct schema_case {
    const char *schema;
    const char *good[8];
    const char *bad[10];
};

static const struct schema_case cases[] = {
    /* primitive types */
    {"{'type':'string'}",
     {"''", "'abc'", "'a\\'b'", "'\\u00e9\\n'", "'\xc3\xa9t\xc3\xa9'", "'x' "},
     {"abc", "'abc", "1", "'a\nb'", "'\\x'", "null", "  'x'"}},
    {"{'type':'integer'}",
     {"0", "-5", "123", "1234567890123456", "7 "},
     {"1.5", "01", "-", "'1'", "1e3", "+1"}},
    {"{'type':'number'}",
     {"0", "-1.5", "1e10", "2.5E-3", "1.0", "12"},
     {"1.", ".5", "+1", "01", "1e", "'1'"}},
    {"{'type':'boolean'}", {"true", "false"}, {"True", "1", "null", "'true'"}},
    {"{'type':'null'}", {"null"}, {"nil", "0", "'null'", ""}},
    {"{}", {"1", "'x'", "[1,{'a':null}]", "{'k':[true]}", "null"}, {"[1,", "{a:1}", "'x", ""}},
    {"true", {"1", "'x'", "[]", "{}"}, {"[", "x"}},
    {"{'type':['string','null']}", {"'x'", "null"}, {"1", "true", "[]"}},
    {"{'type':['integer','array'],'items':{'type':'integer'}}",
     {"1", "[1,2]", "[]"},
     {"'1'", "[1.5]"}},
    /* objects */
    {"{'type':'object','properties':{'a':{'type':'string'},'b':{'type':'integer'}},"
     "'required':['a','b']}",
     {"{'a':'x','b':1}", "{ 'a' : 'x' , 'b' : 1 }", "{\n  'a': 'x',\n  'b': 1\n}"},
     {"{'a':'x'}", "{'b':1,'a':'x'}", "{'a':'x','b':1,'c':2}", "{'a':1,'b':1}", "{}", "[]"}},
    {"{'type':'object','properties':{'a':{'type':'string'},'b':{'type':'integer'},"
     "'c':{'type':'boolean'}},'required':['b']}",
     {"{'b':1}", "{'b':1,'a':'x'}", "{'b':1,'c':true}", "{'b':1,'a':'x','c':false}"},
     {"{}", "{'a':'x','b':1}", "{'b':1,'c':true,'a':'x'}", "{'b':1,'d':1}", "{'b':1,}"}},
    {"{'properties':{'a':{'type':'integer'},'b':{'type':'integer'}},'additionalProperties':false}",
     {"{}", "{'a':1}", "{'b':2}", "{'a':1,'b':2}"},
     {"{'z':1}", "{'b':2,'a':1}", "{'a':1,'z':1}", "{'a':'1'}"}},
    {"{'type':'object','properties':{'a':{'type':'integer'}},'additionalProperties':true}",
     {"{}", "{'a':1}", "{'a':1,'z':2}", "{'z':[1]}", "{'y':1,'z':{}}"},
     {"{'a':'x'}", "{'z'}", "{'z':1,}"}},
    {"{'properties':{'a':{'type':'integer'},'ab':{'type':'integer'}},"
     "'additionalProperties':{'type':'string'}}",
     {"{}", "{'a':1,'abc':'x'}", "{'b':'x','':'y'}", "{'x':'1','y':'2'}", "{'ab':1,'b':''}"},
     {"{'a':'x'}", "{'ab':'x'}", "{'a':1,'a':2}", "{'x':1}", "{'c':'x','ab':1}"}},
    {"{'type':'object','additionalProperties':{'type':'integer'}}",
     {"{}", "{'x':1}", "{'x':1,'y':-2}"},
     {"{'x':'s'}", "{'x':1,'y':true}", "[]"}},
    {"{'type':'object','additionalProperties':false}", {"{}", "{ }"}, {"{'a':1}"}},
    {"{'type':'object'}", {"{}", "{'a':1}", "{'a':{'b':[1,'2']}}"}, {"[]", "1", "{'a'}"}},
    {"{'required':['x']}", {"{'x':1}", "{'x':'s','y':2}"}, {"{}", "{'y':2}"}},
    {"{'properties':{'a\\'b':{'type':'integer'}},'required':['a\\'b']}",
     {"{'a\\'b':1}"},
     {"{'ab':1}", "{'a'b':1}"}},
    {"{'type':'object','properties':{'p':{'type':'object','properties':{'q':{'type':'boolean'}},"
     "'required':['q']}},'required':['p']}",
     {"{'p':{'q':true}}", "{'p': {'q': false}}"},
     {"{'p':{}}", "{'p':{'q':1}}", "{}"}},
    {"{'properties':{'a':{'const':1}}}", {"{}", "{'a':1}"}, {"{'a':2}", "{'b':1}"}},
    /* arrays */
    {"{'type':'array','items':{'type':'integer'},'minItems':2,'maxItems':3}",
     {"[1,2]", "[1,2,3]", "[ 1 , 2 ]"},
     {"[1]", "[1,2,3,4]", "['a','b']", "[]", "[1,2,]"}},
    {"{'type':'array','items':{'type':'string'}}",
     {"[]", "['a']", "['a','b','c']", "[\n 'a'\n]"},
     {"[1]", "['a',]", "[,]", "{}"}},
    {"{'type':'array','minItems':1}", {"[1]", "[1,'a',null]"}, {"[]"}},
    {"{'type':'array','maxItems':0}", {"[]"}, {"[1]"}},
    {"{'type':'array','maxItems':1,'items':{'type':'null'}}",
     {"[]", "[null]"},
     {"[null,null]", "[1]"}},
    {"{'type':'array','prefixItems':[{'type':'integer'},{'type':'string'}]}",
     {"[1,'a']", "[ 1, 'a' ]"},
     {"[1]", "['a',1]", "[1,'a',2]", "[]"}},
    {"{'type':'array','items':[{'type':'boolean'},{'type':'null'}]}",
     {"[true,null]"},
     {"[true]", "[null,true]"}},
    {"{'items':{'type':'null'}}", {"[null]", "[]"}, {"[1]", "null"}},
    /* strings */
    {"{'type':'string','minLength':2,'maxLength':4}",
     {"'ab'", "'abcd'", "'\xc3\xa9\xc3\xa9'", "'a\\n'", "'\\u0041b'"},
     {"'a'", "'abcde'", "''", "'\xc3\xa9'"}},
    {"{'type':'string','maxLength':0}", {"''"}, {"'a'"}},
    {"{'minLength':1}", {"'a'"}, {"''", "1"}},
    {"{'type':'string','format':'date'}",
     {"'2024-02-29'", "'1999-12-31'", "'0001-01-01'"},
     {"'2024-13-01'", "'2024-00-10'", "'2024-1-01'", "'2024-01-32'", "'x'", "'2024-01-00'"}},
    {"{'type':'string','format':'time'}",
     {"'12:34:56Z'", "'23:59:59.123+01:00'", "'00:00:00-12:30'"},
     {"'24:00:00Z'", "'12:60:00Z'", "'12:00:00'", "'1:00:00Z'"}},
    {"{'type':'string','format':'date-time'}",
     {"'2024-01-02T03:04:05Z'"},
     {"'2024-01-02 03:04:05Z'", "'2024-01-02'"}},
    {"{'type':'string','format':'uuid'}",
     {"'123e4567-e89b-12d3-a456-426614174000'"},
     {"'123e4567e89b12d3a456426614174000'", "'g23e4567-e89b-12d3-a456-426614174000'"}},
    {"{'type':'string','format':'email'}", {"'a@b.c'", "''"}, {"1"}},
    /* patterns */
    {"{'type':'string','pattern':'^[a-z]+\\\\d{2,3}$'}",
     {"'abc12'", "'z999'"},
     {"'abc1'", "'ABC12'", "'abc1234'", "''", "'12'"}},
    {"{'type':'string','pattern':'^(foo|bar)-(?:x|y)?$'}",
     {"'foo-'", "'bar-x'", "'foo-y'"},
     {"'baz-'", "'foo-z'", "'foo'", "'foo-xy'"}},
    {"{'type':'string','pattern':'ab'}", {"'ab'", "'xxabyy'", "'ab!'"}, {"'a'", "'ba'", "''"}},
    {"{'type':'string','pattern':'^\\\\w+@\\\\w+\\\\.com$'}",
     {"'a_b@x.com'", "'Z9@q.com'"},
     {"'a@x.org'", "'a@xcom'", "'@x.com'", "'a-b@x.com'"}},
    {"{'type':'string','pattern':'^[^0-9]*$'}",
     {"'abc'", "''", "'a\\'b'", "'\\\\'", "'a\\tb'"},
     {"'a1'", "'9'"}},
    {"{'type':'string','pattern':'^.{3}$'}",
     {"'abc'", "'a b'", "'\xc3\xa9\xc3\xa9\xc3\xa9'"},
     {"'ab'", "'a\\nb'", "'abcd'"}},
    {"{'type':'string','pattern':'^a\\\\.b$'}", {"'a.b'"}, {"'axb'", "'ab'"}},
    {"{'type':'string','pattern':'^\\\\$\\\\d+(\\\\.\\\\d{2})?$'}",
     {"'$5'", "'$5.25'", "'$123'"},
     {"'$5.2'", "'5'", "'$'"}},
    {"{'type':'string','pattern':'^(ab)*c{2}$|^x$'}",
     {"'cc'", "'ababcc'", "'x'"},
     {"'abc'", "'xx'", "'c'", "'abcc '"}},
    {"{'type':'string','pattern':'^a\\'b$'}", {"'a\\'b'"}, {"'ab'", "'a\\\\b'"}},
    {"{'type':'string','pattern':'^[\\\\s]+$'}", {"' '", "'\\t'", "' \\n '"}, {"'a'", "''"}},
    {"{'type':'string','pattern':'^[a-c-]{1,2}[^\\\\Wa]?$'}",
     {"'a'", "'-c'", "'ab_'", "'ab9'"},
     {"'d'", "'aba'", "'a!'"}},
    {"{'type':'string','pattern':'^\\\\x41\\\\u00e9+?$'}",
     {"'A\xc3\xa9'", "'A\xc3\xa9\xc3\xa9'"},
     {"'A'", "'Ae'"}},
    {"{'type':'string','pattern':'^a{2}b{1,}c{0,1}$'}",
     {"'aab'", "'aabbbc'"},
     {"'ab'", "'aabcc'", "'aac'"}},
    /* enum and const */
    {"{'enum':['red','green',1,null,{'a':[1]}]}",
     {"'red'", "'green'", "1", "null", "{'a':[1]}", "{ 'a' : [ 1 ] }"},
     {"'blue'", "2", "'Red'", "{'a':[2]}", "'red'x", "11"}},
    {"{'type':'string','enum':['a','b']}", {"'a'", "'b'"}, {"'c'", "'ab'"}},
    {"{'const':'x'}", {"'x'"}, {"'y'", "x"}},
    {"{'const':{'k':true,'n':[1.5,-2]}}",
     {"{'k':true,'n':[1.5,-2]}"},
     {"{'k':false,'n':[1.5,-2]}", "{'n':[1.5,-2],'k':true}"}},
    /* combinations */
    {"{'anyOf':[{'type':'integer'},{'type':'string','maxLength':2}]}",
     {"1", "'ab'", "''"},
     {"'abc'", "true", "1.5"}},
    {"{'oneOf':[{'type':'boolean'},{'type':'null'}]}", {"true", "null"}, {"1", "'true'"}},
    {"{'allOf':[{'properties':{'a':{'type':'integer'}},'required':['a']},"
     "{'type':'object','properties':{'b':{'type':'string'}}}]}",
     {"{'a':1}", "{'a':1,'b':'x'}"},
     {"{'b':'x'}", "{'a':1,'c':1}", "{}"}},
    {"{'definitions':{'A':{'type':'object','properties':{'a':{'type':'integer'}},'required':['a']},"
     "'B':{'type':'object','required':['b'],'properties':{'b':{'type':'null'}}}},"
     "'allOf':[{'$ref':'#/definitions/A'},{'$ref':'#/definitions/B'}]}",
     {"{'a':1,'b':null}"},
     {"{'a':1}", "{'b':null}"}},
    /* $ref */
    {"{'definitions':{'X':{'type':'integer','minimum':0}},'$ref':'#/definitions/X'}",
     {"5", "0"},
     {"'x'", "-1"}},
    {"{'$defs':{'node':{'type':'object','properties':{'v':{'type':'integer'},"
     "'kids':{'type':'array','items':{'$ref':'#/$defs/node'}}},'required':['v']}},"
     "'$ref':'#/$defs/node'}",
     {"{'v':1}", "{'v':1,'kids':[{'v':2,'kids':[]}]}",
      "{'v':1,'kids':[{'v':2},{'v':3,'kids':[{'v':4}]}]}"},
     {"{'kids':[]}", "{'v':1,'kids':[{}]}", "{'v':1,'kids':{}}"}},
    {"{'type':'object','properties':{'next':{'$ref':'#'}},'additionalProperties':false}",
     {"{}", "{'next':{'next':{}}}"},
     {"{'next':1}", "{'x':{}}"}},
    {"{'type':'array','items':{'$ref':'#/$defs/a~1b'},'$defs':{'a/b':{'type':'boolean'}}}",
     {"[true]"},
     {"[1]"}},
    /* integers with bounds (more in test_int_ranges) */
    {"{'type':'integer','exclusiveMinimum':0,'exclusiveMaximum':10}",
     {"1", "9", "5"},
     {"0", "10", "-1", "01"}},
    {"{'type':'integer','minimum':0,'exclusiveMinimum':true,'maximum':3}", {"1", "3"}, {"0", "4"}},
    {"{'type':'integer','minimum':1.5,'maximum':3.5}", {"2", "3"}, {"1", "4"}},
    {"{'type':'integer','minimum':-1000000000000000000,'maximum':1000000000000000000}",
     {"0", "1000000000000000000", "-1000000000000000000", "999999999999999999"},
     {"1000000000000000001", "-1000000000000000001", "10000000000000000000"}},
};

static void test_cases(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *schema = dq(cases[i].schema), *text;
        struct gram *g = convert(schema, &text);
        for (int j = 0; g && j < 8 && cases[i].good[j]; j++) {
            char *inst = dq(cases[i].good[j]);
            CHECK_MSG(matches(g, inst), "%s\nshould accept: %s\n%s", schema, inst, text);
            free(inst);
        }
        for (int j = 0; g && j < 10 && cases[i].bad[j]; j++) {
            char *inst = dq(cases[i].bad[j]);
            CHECK_MSG(!matches(g, inst), "%s\nshould refuse: %s\n%s", schema, inst, text);
            free(inst);
        }
        gram_free(g);
        free(text);
        free(schema);
    }
}

/* Every integer in [-1100, 1100] is accepted exactly when it is in the range, and never with a
 * leading zero or as -0. */
static void check_range(bool has_lo, long lo, bool has_hi, long hi, const char *extra) {
    char schema[256], *text, num[32];
    int n = snprintf(schema, sizeof schema, "{\"type\":\"integer\"%s", extra);
    if (has_lo)
        n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"minimum\":%ld", lo);
    if (has_hi)
        n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"maximum\":%ld", hi);
    snprintf(schema + n, sizeof schema - (size_t)n, "}");
    struct gram *g = convert(schema, &text);
    int wrong = 0;
    for (long v = -1100; g && v <= 1100; v++) {
        snprintf(num, sizeof num, "%ld", v);
        bool want = (!has_lo || v >= lo) && (!has_hi || v <= hi);
        if (matches(g, num) != want && wrong++ < 3)
            CHECK_MSG(0, "%s: %ld %s\n%s", schema, v, want ? "refused" : "accepted", text);
        snprintf(num, sizeof num, "0%ld", v < 0 ? -v : v);
        if (v && matches(g, num) && wrong++ < 3)
            CHECK_MSG(0, "%s: leading zero %s accepted", schema, num);
    }
    if (g)
        CHECK_MSG(!matches(g, "-0"), "%s: -0 accepted", schema);
    CHECK_MSG(!wrong, "%s: %d wrong", schema, wrong);
    gram_free(g);
    free(text);
}

static void test_int_ranges(void) {
    static const long vals[] = {-1000, -312, -101, -100, -99, -15, -10, -9,  -1,  0,   1,   7,
                                9,     10,   11,   15,   99,  100, 101, 199, 200, 312, 999, 1000};
    const size_t n = sizeof vals / sizeof vals[0];
    for (size_t i = 0; i < n; i++) {
        check_range(true, vals[i], false, 0, "");
        check_range(false, 0, true, vals[i], "");
        for (size_t j = i; j < n; j += 1 + (i % 3)) /* a spread of pairs, all lengths and signs */
            check_range(true, vals[i], true, vals[j], "");
    }
    check_range(true, 15, true, 312, "");
    check_range(true, 123, true, 987, "");
    check_range(true, 1000, true, 1000, "");
    /* beyond the scan: big bounds still cut exactly */
    char *text;
    struct gram *g =
        convert("{\"type\":\"integer\",\"minimum\":123456789,\"maximum\":987654321}", &text);
    static const char *const in[] = {"123456789", "987654321", "500000000", "200000000"};
    static const char *const out[] = {"123456788", "987654322", "99999999", "1000000000"};
    for (int i = 0; g && i < 4; i++) {
        CHECK_MSG(matches(g, in[i]), "%s", in[i]);
        CHECK_MSG(!matches(g, out[i]), "%s", out[i]);
    }
    gram_free(g);
    free(text);
}

/* Refused schemas: OX_ERR_FORMAT, a message, no output. */
static void test_refused(void) {
    static const char *const bad[] = {
        "{",
        "[1,2",
        "",
        "{'type':'strin'}",
        "{'$ref':'#/definitions/nope'}",
        "{'$ref':'http://example.com/s.json'}",
        "{'$ref':'other.json#/a'}",
        "{'type':'string','minLength':5,'maxLength':2}",
        "{'type':'array','minItems':3,'maxItems':1}",
        "{'type':'integer','minimum':10,'maximum':5}",
        "{'type':'integer','exclusiveMinimum':5,'exclusiveMaximum':6}",
        "{'type':'integer','minimum':1e30}",
        "{'type':'string','maxLength':100000}",
        "{'type':'string','minLength':-1}",
        "{'type':'string','pattern':'^(?=a)b$'}",
        "{'type':'string','pattern':'^(a)\\\\1$'}",
        "{'type':'string','pattern':'^\\\\bx$'}",
        "{'type':'string','pattern':'^a++$'}",
        "{'type':'string','pattern':'^[z-a]$'}",
        "{'type':'string','pattern':'^(a$'}",
        "{'type':'string','pattern':'^a)$'}",
        "{'type':'string','pattern':'^*a$'}",
        "{'type':'string','pattern':'a^b'}",
        "{'type':'string','pattern':'^a{5,2}$'}",
        "{'type':'string','pattern':'^a{20000}$'}",
        "{'type':'string','pattern':'^[a'}",
        "{'type':'string','pattern':'^(?<n>a)$'}",
        "false",
        "1",
        "{'$ref':'#'}",
        "{'enum':[]}",
        "{'allOf':[{'type':'string'}]}",
        "{'type':'object','properties':{'a':{}},'required':['b'],'additionalProperties':false}",
        "{'type':'object','properties':{'a':false}}",
        "{'anyOf':{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *schema = dq(bad[i]), *out = (char *)1;
        size_t len = 1;
        enum ox_status st = ox_json_schema_to_grammar(schema, strlen(schema), &out, &len);
        CHECK_MSG(st == OX_ERR_FORMAT, "%s: status %d", schema, (int)st);
        CHECK_MSG(!strncmp(ox_last_error(), "json schema: ", 13), "%s: '%s'", schema,
                  ox_last_error());
        CHECK(out == NULL && len == 0);
        free(out);
        free(schema);
    }
    /* nesting: 30 levels is fine, 100 is refused */
    for (int depth = 30; depth <= 100; depth += 70) {
        char schema[4096] = "";
        for (int i = 0; i < depth; i++)
            strcat(schema, "{\"type\":\"array\",\"items\":");
        strcat(schema, "{\"type\":\"null\"}");
        for (int i = 0; i < depth; i++)
            strcat(schema, "}");
        char *out = NULL;
        enum ox_status st = ox_json_schema_to_grammar(schema, strlen(schema), &out, NULL);
        CHECK_MSG(depth == 30 ? st == OX_OK : st == OX_ERR_FORMAT, "depth %d: %s", depth,
                  ox_last_error());
        free(out);
    }
    /* a chain of distinct $refs counts as nesting too (it recurses in the converter) */
    for (int n = 25; n <= 300; n += 275) {
        char *schema = malloc(64 * 300 + 64), *out = NULL;
        int k = sprintf(schema, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
        for (int i = 0; i < n; i++)
            k += sprintf(schema + k,
                         "\"d%d\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d%d\"}},", i,
                         i + 1);
        sprintf(schema + k, "\"d%d\":{\"type\":\"null\"}}}", n);
        enum ox_status st = ox_json_schema_to_grammar(schema, strlen(schema), &out, NULL);
        CHECK_MSG(n == 25 ? st == OX_OK : st == OX_ERR_FORMAT, "%d refs: %s", n, ox_last_error());
        free(out);
        free(schema);
    }
    CHECK_EQ(ox_json_schema_to_grammar(NULL, 0, NULL, NULL), OX_ERR_INVALID_ARG);
}

/* Many optional properties stay linear in size, and a huge schema hits a limit, not the heap. */
static void test_limits(void) {
    size_t cap = 1 << 20, n = 0;
    char *schema = malloc(cap);
    n += (size_t)snprintf(schema + n, cap - n, "{\"properties\":{");
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(schema + n, cap - n, "%s\"k%d\":{\"type\":\"integer\"}", i ? "," : "",
                              i);
    snprintf(schema + n, cap - n, "}}");
    char *out = NULL;
    size_t len = 0;
    CHECK_MSG(ox_json_schema_to_grammar(schema, strlen(schema), &out, &len) == OX_OK, "%s",
              ox_last_error());
    CHECK_MSG(len < 1000000, "2000 optional properties: %zu bytes", len);
    free(out);
    /* 8 MB of enum strings of spaces (each written \x20) is past the output limit */
    cap = 9u << 20;
    schema = realloc(schema, cap);
    n = (size_t)snprintf(schema, cap, "{\"enum\":[");
    for (int i = 0; i < 40000; i++)
        n += (size_t)snprintf(schema + n, cap - n, "%s\"%200d\"", i ? "," : "", i);
    snprintf(schema + n, cap - n, "]}");
    out = NULL;
    CHECK_EQ(ox_json_schema_to_grammar(schema, strlen(schema), &out, &len), OX_ERR_FORMAT);
    CHECK_MSG(strstr(ox_last_error(), "exceed") != NULL, "%s", ox_last_error());
    free(schema);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", test_data_dir());
    if (ox_vocab_load(path, &vocab) != OX_OK)
        fprintf(stderr, "test_json_schema: no vocabulary (%s): skipping the sampler round trip\n",
                ox_last_error());
    test_cases();
    test_int_ranges();
    test_refused();
    test_limits();
    ox_vocab_free(vocab);
    return test_finish("test_json_schema");
}
