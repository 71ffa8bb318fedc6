/* pretok.c: the tokenizer.ggml.pre table (regex sets + llama.cpp's per-model flags) and the
 * PCRE2 splitter that applies a set in sequence, with llama.cpp's reading of invalid UTF-8. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretok.h"
#include "core/utf8.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- regex sets ----------------------------------------------------------------------------
 * Transcribed from llama.cpp's llm_tokenizer_bpe constructor (src/llama-vocab.cpp), which
 * takes them from each model's tokenizer.json. Where llama.cpp rewrote a pattern for
 * std::regex (case-insensitive groups spelled '[sS]', letter classes approximated with
 * lookaheads, possessive quantifiers made greedy) we use the original it quotes in a comment,
 * since PCRE2 runs the original as Hugging Face does. Non-ASCII class members are written as
 * \x{...} escapes of the exact code points in llama.cpp's source. `\s` and `\S` are rewritten
 * at compile time (see rewrite_whitespace). NULL ends each list. */

/* clang-format off */
#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
/* GPT-2's pattern, also the core of several others. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* The Llama-3 / Qwen2 family differs only in how digits group. */
#define RE_LLAMA3_LIKE(digits)                                                                   \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" digits                                        \
                 "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-4o (o200k) style: words split at lower->upper case changes, contraction suffixes. */
#define UPPERISH "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWERISH "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_O200K_WORDS(suffix)                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+" suffix                                    \
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*" suffix
#define RE_CJK_KANA "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"
/* DeepSeek-V3 / AFMoE: ASCII punctuation glued to a following ASCII word, punctuation and
 * symbol runs apart from letters. */
#define RE_PUNCT_WORDS                                                                           \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"          \
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const re_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const re_llama3[] = {RE_LLAMA3_LIKE("\\p{N}{1,3}"), NULL};
static const char *const re_jais2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
                 "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
    NULL};
static const char *const re_deepseek3[] = {"\\p{N}{1,3}", RE_CJK_KANA, RE_PUNCT_WORDS, NULL};
/* llama.cpp carries only its '[sS]' spelling of Youtu's contractions; used as is. */
static const char *const re_youtu[] = {
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}"
    "\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+|"
    "[\\x{3105}-\\x{312F}]+|" RE_CJK_KANA,
    RE_O200K_WORDS("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?")
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}", NULL};
static const char *const re_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_qwen2[] = {RE_LLAMA3_LIKE("\\p{N}"), NULL};
static const char *const re_qwen35[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
                 "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_poro[] = {
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", NULL};
static const char *const re_viking[] = {
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", "\\p{N}",
    NULL};
static const char *const re_tekken[] = {
    RE_O200K_WORDS("") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_chameleon[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2, NULL};
#define RE_O200K_TAIL "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
static const char *const re_gpt4o[] = {RE_O200K_WORDS(CONTRACTIONS "?") RE_O200K_TAIL, NULL};
static const char *const re_tiny_aya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)", RE_O200K_WORDS(CONTRACTIONS "?") RE_O200K_TAIL, NULL};
/* Kimi-K2 (tiktoken, Rust regex syntax): the class intersections [X&&[^\p{Han}]] are spelled
 * for PCRE2 as (?:(?!\p{Han})[X]). */
#define NOT_HAN "(?!\\p{Han})"
static const char *const re_kimi_k2[] = {
    "[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?(?:" NOT_HAN "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*"
    "(?:" NOT_HAN "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+" CONTRACTIONS "?"
    "|[^\\r\\n\\p{L}\\p{N}]?(?:" NOT_HAN "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+"
    "(?:" NOT_HAN "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*" CONTRACTIONS "?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_superbpe[] = {"\\p{N}+", "(?=(\\d{3})+(?!\\d))", NULL};
static const char *const re_bailingmoe[] = {
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|"
    "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_seed_coder[] = {
    CONTRACTIONS "|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|"
                 "\\s+(?!\\S)|\\s+",
    NULL};
/* AFMoE: llama.cpp replaces its first pattern by code that cuts each digit run into groups of
 * three counted from the right; this lookahead does the same. The CJK range U+8C48..U+FAFF is
 * as llama.cpp's source has it. */
static const char *const re_afmoe[] = {
    "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))",
    "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{8C48}-\\x{FAFF}\\x{3040}-\\x{309F}"
    "\\x{30A0}-\\x{30FF}\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{E40}-\\x{E7F}\\x{E80}-\\x{EFF}"
    "\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}\\x{A9E0}-\\x{A9FF}"
    "\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+",
    RE_PUNCT_WORDS, NULL};
static const char *const re_laguna[] = {
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_exaone_moe[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"
                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_newlines[] = {"[^\\n]+|[\\n]+", NULL};
static const char *const re_minicpm5[] = {"\\p{N}{1,3}", RE_LLAMA3_LIKE("\\p{N}+"), NULL};
static const char *const re_whitespace[] = {"\\S+", NULL};
/* clang-format on */

/* ---- the pre value table ------------------------------------------------------------------
 * Every value of the tokenizer_pre chain in llama_vocab::impl::load, with the flags it sets.
 * BPE starts from clean_spaces = true; NOCLEAN marks the values that turn it off. */
enum {
    F_IGNORE_MERGES = 1 << 0,
    F_NOCLEAN = 1 << 1,
    F_ADD_BOS = 1 << 2,
    F_ADD_SEP = 1 << 3,
    F_ESCAPE_WS = 1 << 4,
    F_RAW_BYTES = 1 << 5, /* no GPT-2 byte map */
    F_FORCE_BOS = 1 << 6,
    F_NO_BOS_ID = 1 << 7,
    F_NEWLINE_RUNS = 1 << 8,
    F_NFC = 1 << 9, /* tokenizer.json's normalizer is NFC (llama.cpp skips it) */
};

struct pre_entry {
    const char *name, *kind;
    const char *const *regexes;
    unsigned flags;
};

#define IGN F_IGNORE_MERGES
#define NOC F_NOCLEAN
/* clang-format off */
static const struct pre_entry pre_table[] = {
    {"default", "default", re_default, 0},
    {"minicpm5", "minicpm5", re_minicpm5, IGN},
    {"llama3", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"llama-v3", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"llama-bpe", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"falcon3", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"falcon-h1", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"pixtral", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"midm-2.0", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"lfm2", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"jina-v5-nano", "llama3", re_llama3, IGN | F_ADD_BOS},
    {"deepseek-llm", "deepseek-llm", re_deepseek_llm, NOC},
    {"deepseek-coder", "deepseek-coder", re_deepseek_coder, NOC},
    {"deepseek-v3", "deepseek-v3", re_deepseek3, NOC},
    {"youtu", "youtu", re_youtu, NOC | IGN},
    {"falcon", "falcon", re_falcon, 0},
    {"mpt", "gpt2", re_gpt2, F_NFC}, /* GPT-NeoX's tokenizer.json normalizes to NFC */
    {"starcoder", "starcoder", re_starcoder, 0},
    {"gpt-2", "gpt2", re_gpt2, 0},
    {"phi-2", "gpt2", re_gpt2, 0},
    {"jina-es", "gpt2", re_gpt2, 0},
    {"jina-de", "gpt2", re_gpt2, 0},
    {"gigachat", "gpt2", re_gpt2, 0},
    {"jina-v2-es", "gpt2", re_gpt2, 0},
    {"jina-v2-de", "gpt2", re_gpt2, 0},
    {"a.x-4.0", "gpt2", re_gpt2, 0},
    {"mellum", "gpt2", re_gpt2, 0},
    {"modern-bert", "gpt2", re_gpt2, 0},
    {"jais-2", "jais2", re_jais2, 0},
    {"gemma4", "gemma4", re_newlines, F_RAW_BYTES | F_ESCAPE_WS | F_FORCE_BOS | F_NEWLINE_RUNS},
    {"granite-embed-multi-311m", "gemma4", re_newlines,
     F_RAW_BYTES | F_ESCAPE_WS | F_FORCE_BOS | F_NEWLINE_RUNS},
    {"sarvam-moe", "sarvam-moe", re_newlines, F_RAW_BYTES | F_ESCAPE_WS | NOC},
    {"jina-v1-en", "gpt2", re_gpt2, F_ADD_SEP},
    {"jina-v2-code", "gpt2", re_gpt2, F_ADD_SEP},
    {"roberta-bpe", "gpt2", re_gpt2, F_ADD_SEP},
    {"whitespace", "whitespace", re_whitespace, F_RAW_BYTES},
    {"refact", "starcoder", re_starcoder, 0},
    {"command-r", "starcoder", re_starcoder, NOC},
    {"qwen2", "qwen2", re_qwen2, NOC | F_NFC},
    {"deepseek-r1-qwen", "qwen2", re_qwen2, NOC | F_NFC},
    {"kormo", "qwen2", re_qwen2, NOC},
    {"f2llmv2", "qwen2", re_qwen2, NOC},
    {"qwen35", "qwen35", re_qwen35, NOC | F_NFC},
    {"stablelm2", "qwen2", re_qwen2, 0},
    {"olmo", "gpt2", re_gpt2, 0},
    {"dbrx", "llama3", re_llama3, 0},
    {"smaug-bpe", "llama3", re_llama3, 0},
    {"poro-chat", "poro", re_poro, NOC},
    {"glm4", "llama3", re_llama3, F_NO_BOS_ID},
    {"chatglm-bpe", "llama3", re_llama3, F_NO_BOS_ID},
    {"viking", "viking", re_viking, NOC},
    {"jais", "gpt2", re_gpt2, 0},
    {"tekken", "tekken", re_tekken, NOC | IGN | F_ADD_BOS},
    {"smollm", "starcoder", re_starcoder, NOC},
    {"codeshell", "starcoder", re_starcoder, 0},
    {"bloom", "poro", re_poro, 0},
    {"gpt3-finnish", "poro", re_poro, 0},
    {"exaone", "starcoder", re_starcoder, 0},
    {"exaone4", "gpt2", re_gpt2, 0},
    {"exaone-moe", "exaone-moe", re_exaone_moe, 0},
    {"chameleon", "chameleon", re_chameleon, F_ADD_BOS | NOC},
    {"minerva-7b", "starcoder", re_starcoder, 0},
    {"megrez", "qwen2", re_qwen2, 0},
    {"gpt-4o", "gpt-4o", re_gpt4o, NOC},
    {"llama4", "gpt-4o", re_gpt4o, NOC},
    {"kanana2", "gpt-4o", re_gpt4o, NOC},
    {"talkie", "gpt-4o", re_gpt4o, NOC},
    /* llama.cpp runs GPT-4o's lookahead spelling with \p{M} added, which approximates the
     * original o200k pattern; we run the original. */
    {"granite-embed-multi-97m", "gpt-4o", re_gpt4o, NOC | IGN},
    {"tiny_aya", "tiny_aya", re_tiny_aya, NOC},
    {"cohere2moe", "tiny_aya", re_tiny_aya, NOC},
    {"superbpe", "superbpe", re_superbpe, NOC},
    {"trillion", "gpt2", re_gpt2, NOC},
    {"granite-docling", "gpt2", re_gpt2, NOC},
    {"bailingmoe", "bailingmoe", re_bailingmoe, NOC},
    {"bailingmoe2", "bailingmoe", re_bailingmoe, NOC},
    {"llada-moe", "bailingmoe", re_bailingmoe, NOC},
    {"seed-coder", "seed-coder", re_seed_coder, NOC},
    {"hunyuan", "qwen2", re_qwen2, NOC},
    {"hunyuan-dense", "deepseek-v3", re_deepseek3, NOC},
    {"joyai-llm", "deepseek-v3", re_deepseek3, NOC},
    {"kimi-k2", "kimi-k2", re_kimi_k2, NOC},
    {"grok-2", "qwen2", re_qwen2, NOC},
    {"afmoe", "afmoe", re_afmoe, NOC},
    {"laguna", "laguna", re_laguna, NOC},
    {"minimax-m2", "gpt-4o", re_gpt4o, NOC},
    {"solar-open", "qwen2", re_qwen2, NOC},
    {"mellum2", "starcoder", re_starcoder, 0},
};
/* clang-format on */
#undef IGN
#undef NOC

#define N_PRE (sizeof pre_table / sizeof pre_table[0])

static const struct pre_entry *find_pre(const char *pre) {
    if (!pre || !*pre)
        pre = "default"; /* llama.cpp: a missing pre value means the default splitter */
    for (size_t i = 0; i < N_PRE; i++) {
        if (strcmp(pre_table[i].name, pre) == 0)
            return &pre_table[i];
    }
    return NULL;
}

enum ox_status pretok_config_for(const char *pre, struct pretok_config *out) {
    const struct pre_entry *e = find_pre(pre);
    if (!e)
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "tokenizer: unknown pre-tokenizer type '%s' "
                       "(tokenizer.ggml.pre)",
                       pre);
    *out = (struct pretok_config){
        .name = e->name,
        .kind = e->kind,
        .byte_encode = !(e->flags & F_RAW_BYTES),
        .ignore_merges = (e->flags & F_IGNORE_MERGES) != 0,
        .clean_spaces = !(e->flags & F_NOCLEAN),
        .nfc = (e->flags & F_NFC) != 0,
        .escape_whitespaces = (e->flags & F_ESCAPE_WS) != 0,
        .add_bos = (e->flags & F_ADD_BOS) != 0,
        .add_sep = (e->flags & F_ADD_SEP) != 0,
        .force_add_bos = (e->flags & F_FORCE_BOS) != 0,
        .no_default_bos = (e->flags & F_NO_BOS_ID) != 0,
        .newline_runs_whole = (e->flags & F_NEWLINE_RUNS) != 0,
    };
    return OX_OK;
}

size_t pretok_n_names(void) {
    return N_PRE;
}

const char *pretok_name(size_t i) {
    return i < N_PRE ? pre_table[i].name : NULL;
}

/* ---- compiling ------------------------------------------------------------------------------ */

#define PRETOK_MAX_REGEXES 8

/* Three patterns cut digit runs into groups of three counted from the right. As regexes they
 * look ahead to the end of the run at every match, which is quadratic in its length (a 1 MB
 * number would take hours), so they run as one-pass code giving the same pieces (test_bpe
 * checks the two against each other), as llama.cpp also does for AFMoE and Tiny Aya. */
enum digit_rule {
    DIGITS_NONE,
    DIGITS_ISOLATE,      /* the groups are matches */
    DIGITS_ISOLATE_WORD, /* the same for runs not followed by a word character (the \b) */
    DIGITS_CUT,          /* zero-width matches: cut before each group of three */
};

static const struct {
    const char *pattern, *run; /* the regex it replaces; what a run of digits is */
    enum digit_rule rule;
} digit_patterns[] = {
    {"\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))", "\\p{N}+", DIGITS_ISOLATE},
    {"\\d{1,3}(?=(?:\\d{3})*\\b)", "\\d+", DIGITS_ISOLATE_WORD},
    {"(?=(\\d{3})+(?!\\d))", "\\d+", DIGITS_CUT},
};

struct pretok {
    struct pretok_config cfg;
    size_t n_regexes;
    pcre2_code *code[PRETOK_MAX_REGEXES];
    bool jit[PRETOK_MAX_REGEXES]; /* JIT-compiled: matched with pcre2_jit_match */
    enum digit_rule digits[PRETOK_MAX_REGEXES];
    pcre2_code *run[PRETOK_MAX_REGEXES]; /* digit runs, where digits[i] is set */
    bool run_jit[PRETOK_MAX_REGEXES];
    pcre2_code *word; /* \w anchored: the \b test of DIGITS_ISOLATE_WORD */
    bool word_jit;
};

/* PCRE2's \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR), which stopped being white space
 * in Unicode 6.3; Hugging Face's regex engines and llama.cpp's tables leave it out. Spelling
 * \s as \p{White_Space} (and \S as its negation) is the one-character fix; both forms work
 * inside and outside classes. Returns a malloc'd pattern or NULL when out of memory. */
static char *rewrite_whitespace(const char *src) {
    size_t n = strlen(src), extra = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (src[i] == '\\') {
            extra += (src[i + 1] == 's' || src[i + 1] == 'S') ? 14 : 0;
            i++; /* skip the escaped char, so "\\\\s" stays a backslash and an 's' */
        }
    }
    char *dst = malloc(n + extra + 1), *d = dst;
    if (!dst)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\\' && i + 1 < n) {
            char c = src[++i];
            if (c == 's' || c == 'S') {
                memcpy(d, c == 's' ? "\\p{White_Space}" : "\\P{White_Space}", 15);
                d += 15;
            } else {
                *d++ = '\\';
                *d++ = c;
            }
        } else {
            *d++ = src[i];
        }
    }
    *d = '\0';
    return dst;
}

static enum ox_status compile_one(const struct pretok_config *cfg, size_t idx, const char *src,
                                  uint32_t extra, pcre2_code **out, bool *jit) {
    char *pattern = rewrite_whitespace(src);
    if (!pattern)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory compiling pre-tokenizer '%s'",
                       cfg->kind);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    /* UTF + UCP: code points and Unicode properties for \d \w \b. DOLLAR_ENDONLY: '$' is the
     * end of the piece only, as in std::regex. Never PCRE2_MATCH_INVALID_UTF: it makes each
     * interpreter match re-scan the subject (quadratic); the input is repaired up front. */
    *out =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | extra, &err, &err_off, NULL);
    free(pattern);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return ox_fail(OX_ERR_UNSUPPORTED,
                       "tokenizer: pre-tokenizer '%s' regex %zu does not compile at offset "
                       "%zu: %s",
                       cfg->kind, idx, (size_t)err_off, (const char *)msg);
    }
    /* JIT is 4-5x faster; where it is unavailable we match with the interpreter. */
    *jit = pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE) == 0;
    return OX_OK;
}

/* Compile regex i of the set, and its one-pass replacement's helpers where it has one. */
static enum ox_status compile_entry(struct pretok *p, size_t i, const char *src) {
    OX_TRY(compile_one(&p->cfg, i, src, 0, &p->code[i], &p->jit[i]));
    for (size_t k = 0; k < sizeof digit_patterns / sizeof digit_patterns[0]; k++) {
        if (strcmp(src, digit_patterns[k].pattern) != 0 || p->cfg.regex_only)
            continue;
        p->digits[i] = digit_patterns[k].rule;
        OX_TRY(compile_one(&p->cfg, i, digit_patterns[k].run, 0, &p->run[i], &p->run_jit[i]));
        if (p->digits[i] == DIGITS_ISOLATE_WORD && !p->word)
            OX_TRY(compile_one(&p->cfg, i, "\\w", PCRE2_ANCHORED, &p->word, &p->word_jit));
    }
    return OX_OK;
}

enum ox_status pretok_create(const struct pretok_config *cfg, struct pretok **out) {
    *out = NULL;
    const struct pre_entry *e = find_pre(cfg->name);
    if (!e)
        return ox_fail(OX_ERR_UNSUPPORTED, "tokenizer: unknown pre-tokenizer type '%s'",
                       cfg->name ? cfg->name : "(null)");
    struct pretok *p = calloc(1, sizeof *p);
    if (!p)
        return ox_fail(OX_ERR_OOM, "tokenizer: out of memory");
    p->cfg = *cfg;
    for (const char *const *re = e->regexes; *re; re++) {
        enum ox_status st = p->n_regexes < PRETOK_MAX_REGEXES
                                ? compile_entry(p, p->n_regexes, *re)
                                : ox_fail(OX_ERR_UNSUPPORTED, "tokenizer: too many regexes");
        p->n_regexes++; /* counted even on failure, so pretok_free frees what compiled */
        if (st != OX_OK) {
            pretok_free(p);
            return st;
        }
    }
    *out = p;
    return OX_OK;
}

void pretok_free(struct pretok *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n_regexes; i++) {
        pcre2_code_free(p->code[i]);
        pcre2_code_free(p->run[i]);
    }
    pcre2_code_free(p->word);
    free(p);
}

/* ---- reading the input as llama.cpp does ------------------------------------------------------
 * llama.cpp decodes the text with unicode_cpts_from_utf8: the lead byte gives the length and
 * the continuation bytes must be 10xxxxxx, but overlong forms, surrogates and values above
 * U+10FFFF are accepted; a byte that starts no such sequence becomes U+FFFD and decoding goes
 * on at the next byte. The pieces are then re-encoded from the code points. So an overlong
 * form comes out in its shortest encoding, a bad byte as EF BF BD, and a surrogate as its
 * three bytes ED xx xx. We build the same text. PCRE2 cannot take surrogates, so the subject
 * the regexes see holds a stand-in of the same length (U+F000 + offset: private use, category
 * C like llama.cpp's flags for surrogates) and a second copy keeps the real bytes. A value
 * above U+10FFFF makes llama.cpp throw out of llama_tokenize; we read its bytes as invalid
 * (one U+FFFD each) instead. */

/* Length of the longest prefix of s that is strict UTF-8 (what PCRE2 accepts). */
static size_t valid_prefix(const uint8_t *s, size_t n) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { /* ASCII run: the common case, 8 bytes at a time */
            while (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, s + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            if (i < n && s[i] < 0x80)
                i++;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_decode_lax(s + i, n - i, &cp);
        if (k == 0 || cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k;
    }
    return n;
}

static enum ox_status reserve_bytes(char **buf, size_t *cap, size_t need) {
    if (*cap >= need)
        return OX_OK;
    char *p = realloc(*buf, need);
    if (!p)
        return ox_fail(OX_ERR_OOM, "tokenizer: cannot allocate %zu bytes", need);
    *buf = p;
    *cap = need;
    return OX_OK;
}

/* Build res->subject (and res->out_text) from text per the rules above; also turns raw ' '
 * bytes into U+2581 when escape is set (llama.cpp's llama_escape_whitespace works on bytes). */
static enum ox_status repair_text(const uint8_t *s, size_t n, bool escape,
                                  struct pretok_split_result *res) {
    if (n > (SIZE_MAX - 1) / 3)
        return ox_fail(OX_ERR_OOM, "tokenizer: text of %zu bytes is too long", n);
    OX_TRY(reserve_bytes(&res->subject, &res->subject_cap, 3 * n + 1));
    OX_TRY(reserve_bytes(&res->out_text, &res->out_cap, 3 * n + 1));
    char *sub = res->subject, *out = res->out_text;
    size_t j = 0;
    bool surrogates = false;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t k = utf8_decode_lax(s + i, n - i, &cp);
        if (k == 0 || cp > 0x10FFFF) {
            cp = 0xFFFD;
            k = 1;
        } else if (escape && k == 1 && cp == ' ') {
            cp = 0x2581;
        }
        size_t w = utf8_encode(cp, out + j);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            utf8_encode(0xF000 + (cp - 0xD800), sub + j); /* same length: 3 bytes */
            surrogates = true;
        } else {
            memcpy(sub + j, out + j, w);
        }
        i += k;
        j += w;
    }
    res->text = surrogates ? res->out_text : res->subject;
    res->text_len = j;
    return OX_OK;
}

/* ---- splitting ---------------------------------------------------------------------------- */

static enum ox_status push_span(struct pretok_split_result *res, size_t off, size_t len) {
    if (res->n_next == res->next_cap) {
        size_t cap = res->next_cap ? 2 * res->next_cap : 256;
        struct pretok_span *p = realloc(res->next_spans, cap * sizeof *p);
        if (!p)
            return ox_fail(OX_ERR_OOM, "tokenizer: cannot allocate %zu pieces", cap);
        res->next_spans = p;
        res->next_cap = cap;
    }
    res->next_spans[res->n_next++] = (struct pretok_span){off, len};
    return OX_OK;
}

/* After a match ran into one of PCRE2's resource limits: from now on this result matches with
 * a large JIT stack and raised interpreter limits. The defaults (32 KiB JIT stack, 20 MB heap)
 * suit most pieces; patterns with repeated groups (exaone-moe) need memory linear in the
 * length of a long piece. */
static enum ox_status raise_limits(struct pretok_split_result *res) {
    if (res->match_ctx)
        return ox_fail(OX_ERR_UNSUPPORTED, "tokenizer: regex match exceeds raised limits");
    pcre2_match_context *ctx = pcre2_match_context_create(NULL);
    pcre2_jit_stack *stack = pcre2_jit_stack_create(64 * 1024, 512u * 1024 * 1024, NULL);
    if (!ctx || !stack) {
        pcre2_match_context_free(ctx);
        pcre2_jit_stack_free(stack);
        return ox_fail(OX_ERR_OOM, "tokenizer: cannot allocate a regex match stack");
    }
    pcre2_jit_stack_assign(ctx, NULL, stack);
    pcre2_set_heap_limit(ctx, 8u * 1024 * 1024); /* KiB: 8 GiB */
    pcre2_set_match_limit(ctx, UINT32_MAX);
    pcre2_set_depth_limit(ctx, UINT32_MAX);
    res->match_ctx = ctx;
    res->jit_stack = stack;
    return OX_OK;
}

/* One match attempt of code (used for regex ri); retries once with raised limits when PCRE2
 * runs out of resources. Sets *found, and [*ms, *me) on a match. */
static enum ox_status match_code(const struct pretok *p, size_t ri, const pcre2_code *code,
                                 bool jit, const char *subj, size_t n, size_t start, uint32_t opts,
                                 struct pretok_split_result *res, int *found, size_t *ms,
                                 size_t *me) {
    for (;;) {
        /* pcre2_jit_match skips pcre2_match's argument checks: worth it at one call per word */
        int rc = jit ? pcre2_jit_match(code, (PCRE2_SPTR)subj, n, start, opts, res->match_data,
                                       res->match_ctx)
                     : pcre2_match(code, (PCRE2_SPTR)subj, n, start, opts | PCRE2_NO_UTF_CHECK,
                                   res->match_data, res->match_ctx);
        if (rc >= 0) { /* 0: matched, ovector too small for the groups we do not need */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(res->match_data);
            *found = 1;
            *ms = ov[0];
            *me = ov[1];
            return OX_OK;
        }
        if (rc == PCRE2_ERROR_NOMATCH) {
            *found = 0;
            return OX_OK;
        }
        bool limit = rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
                     rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                     rc == PCRE2_ERROR_NOMEMORY;
        if (!limit || res->match_ctx) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ox_fail(limit ? OX_ERR_OOM : OX_ERR_UNSUPPORTED,
                           "tokenizer: pre-tokenizer '%s' regex %zu failed on a piece of %zu "
                           "bytes: %s",
                           p->cfg.kind, ri, n, (const char *)msg);
        }
        OX_TRY(raise_limits(res));
    }
}

static enum ox_status match_at(const struct pretok *p, size_t ri, const char *subj, size_t n,
                               size_t start, uint32_t opts, struct pretok_split_result *res,
                               int *found, size_t *ms, size_t *me) {
    return match_code(p, ri, p->code[ri], p->jit[ri], subj, n, start, opts, res, found, ms, me);
}

/* End the current piece at offset cut of the piece starting at base (empty pieces dropped). */
static enum ox_status cut_at(struct pretok_split_result *res, size_t base, size_t *kept,
                             size_t cut) {
    if (cut > *kept)
        OX_TRY(push_span(res, base + *kept, cut - *kept));
    *kept = cut > *kept ? cut : *kept;
    return OX_OK;
}

/* Whether the one-pass digit splitter cuts before digit j of a run of n digits: before each
 * group of three counted from the right. The isolating rules cut at both ends too; DIGITS_CUT
 * only where a whole group follows (its lookahead needs one). */
static bool digit_cut(enum digit_rule rule, size_t j, size_t n) {
    size_t rest = n - j;
    return rule == DIGITS_CUT ? rest >= 3 && rest % 3 == 0 : j == 0 || rest % 3 == 0;
}

/* The one-pass form of the digit-grouping regexes (see digit_patterns); groups count code
 * points, not bytes. */
static enum ox_status split_digits(const struct pretok *p, size_t ri, const char *subject,
                                   struct pretok_span piece, struct pretok_split_result *res) {
    const char *s = subject + piece.off;
    size_t n = piece.len, pos = 0, kept = 0;
    enum digit_rule rule = p->digits[ri];
    while (pos < n) {
        int found, word = 0;
        size_t rs, re, ws, we, n_digits = 0;
        OX_TRY(match_code(p, ri, p->run[ri], p->run_jit[ri], s, n, pos, 0, res, &found, &rs, &re));
        if (!found)
            break;
        pos = re;
        if (rule == DIGITS_ISOLATE_WORD && re < n)
            OX_TRY(match_code(p, ri, p->word, p->word_jit, s, n, re, 0, res, &word, &ws, &we));
        if (word)
            continue; /* no \b after the run: the regex matches nowhere in it */
        for (size_t b = rs; b < re; b++)
            n_digits += ((uint8_t)s[b] & 0xC0) != 0x80;
        for (size_t b = rs, j = 0;; j++) {
            if (digit_cut(rule, j, n_digits))
                OX_TRY(cut_at(res, piece.off, &kept, b));
            if (b == re)
                break;
            do /* to the next code point */
                b++;
            while (b < re && ((uint8_t)s[b] & 0xC0) == 0x80);
        }
    }
    return cut_at(res, piece.off, &kept, n);
}

/* Split one piece with regex ri, appending to next_spans: each match is a piece, and so is
 * the text between matches (llama.cpp's unicode_regex_split keeps unmatched text). Empty
 * matches only mark boundaries; empty pieces are dropped (they yield no tokens). */
static enum ox_status split_piece(const struct pretok *p, size_t ri, const char *subject,
                                  struct pretok_span piece, struct pretok_split_result *res) {
    if (p->digits[ri] != DIGITS_NONE)
        return split_digits(p, ri, subject, piece, res);
    const char *s = subject + piece.off; /* the piece is the whole subject: lookarounds and $
                                            see its ends, as llama.cpp's per-piece matching */
    size_t n = piece.len, pos = 0, kept = 0;
    uint32_t opts = 0;
    /* At pos == n only an empty match is possible, and it would split nothing. */
    while (pos < n) {
        int found;
        size_t ms, me;
        OX_TRY(match_at(p, ri, s, n, pos, opts, res, &found, &ms, &me));
        if (!found)
            break;
        if (ms > kept)
            OX_TRY(push_span(res, piece.off + kept, ms - kept));
        if (me > ms)
            OX_TRY(push_span(res, piece.off + ms, me - ms));
        kept = me;
        /* After an empty match, look again from the same place for a non-empty one (and
         * anything after it), as regex iterators do; without this the loop would not move. */
        opts = me == ms ? PCRE2_NOTEMPTY_ATSTART : 0;
        pos = me;
    }
    if (kept < n)
        OX_TRY(push_span(res, piece.off + kept, n - kept));
    return OX_OK;
}

enum ox_status pretok_split(const struct pretok *p, const char *text, size_t len,
                            struct pretok_split_result *res) {
    res->n_spans = 0;
    const char *subject = text;
    size_t good = valid_prefix((const uint8_t *)text, len);
    bool escape = p->cfg.escape_whitespaces && memchr(text, ' ', len) != NULL;
    if (good < len || escape) {
        OX_TRY(repair_text((const uint8_t *)text, len, escape, res));
        subject = res->subject;
        len = res->text_len;
    } else {
        res->text = text;
        res->text_len = len;
    }
    if (!res->match_data) {
        res->match_data = pcre2_match_data_create(1, NULL);
        if (!res->match_data)
            return ox_fail(OX_ERR_OOM, "tokenizer: cannot allocate regex match data");
    }
    res->n_next = 0;
    if (len > 0)
        OX_TRY(push_span(res, 0, len));
    for (size_t ri = 0; ri < p->n_regexes; ri++) {
        /* the pieces so far become the input of this regex */
        struct pretok_span *cur = res->next_spans;
        size_t n_cur = res->n_next, cur_cap = res->next_cap;
        res->next_spans = res->spans;
        res->next_cap = res->spans_cap;
        res->n_next = 0;
        res->spans = cur;
        res->spans_cap = cur_cap;
        for (size_t i = 0; i < n_cur; i++)
            OX_TRY(split_piece(p, ri, subject, cur[i], res));
    }
    /* hand the final list over in spans */
    struct pretok_span *fin = res->next_spans;
    size_t fin_cap = res->next_cap;
    res->next_spans = res->spans;
    res->next_cap = res->spans_cap;
    res->spans = fin;
    res->spans_cap = fin_cap;
    res->n_spans = res->n_next;
    res->n_next = 0;
    return OX_OK;
}

void pretok_split_result_free(struct pretok_split_result *res) {
    if (!res)
        return;
    free(res->subject);
    free(res->out_text);
    free(res->spans);
    free(res->next_spans);
    pcre2_match_data_free(res->match_data);
    pcre2_match_context_free(res->match_ctx);
    pcre2_jit_stack_free(res->jit_stack);
    memset(res, 0, sizeof *res);
}
