/* The recommended profile's built-in volatile patterns over ASCII text, in C.
 *
 * scan(value) gives exactly what loopwarden.core.volatile.builtin_text_python gives (and so
 * what applying each of BUILTIN_PATTERNS in turn with re.sub gives) for an exact str whose text
 * is ASCII; for anything else it returns None and the caller takes the Python path, which stays
 * the specification (tests/test_volatile_scan.py compares the two).
 *
 * In ASCII text \w is [A-Za-z0-9_], \d is [0-9], \s is [ \t\n\v\f\r\x1c-\x1f] and (?i:...) is
 * plain ASCII case-insensitivity. Each pattern is a pass over the output of the previous one,
 * as re.sub would run it: leftmost match first, the next search from the end of the last match,
 * the word boundaries read from the pass's input. Each pass visits only the positions where a
 * match can start (hyphens and colons found by memchr, the rest from the runs of digits, found
 * eight bytes at a time), and every pattern's backtracking reduces
 * to a few fixed choices, written out below beside each matcher. A pass that replaces nothing
 * copies nothing; a text nothing replaces comes back as the same object.
 *
 * No read past the text: a read that may fall outside goes through AT(), which gives 0 there (a
 * byte with no class: not a word character, so a word boundary holds at the end, as in re);
 * the others follow a length check. C99, Python.h only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    K_DIGIT = 1,   /* [0-9] */
    K_HEXL = 2,    /* [a-fA-F] */
    K_WORD = 4,    /* [A-Za-z0-9_] */
    K_SPACE = 8,   /* \s in ASCII */
    K_DASH = 16,   /* - */
    K_COLON = 32,  /* : */
    K_PIDSEP = 64, /* [\s:=#] */
    K_HEX = 128,   /* [0-9a-fA-F] */
};

static unsigned char CLS[256];
static unsigned char LOWER[256]; /* ASCII lower case */

static void
init_classes(void)
{
    int c;
    for (c = '0'; c <= '9'; c++)
        CLS[c] |= K_DIGIT | K_WORD;
    for (c = 'a'; c <= 'z'; c++)
        CLS[c] |= K_WORD;
    for (c = 'A'; c <= 'Z'; c++)
        CLS[c] |= K_WORD;
    for (c = 'a'; c <= 'f'; c++)
        CLS[c] |= K_HEXL;
    for (c = 'A'; c <= 'F'; c++)
        CLS[c] |= K_HEXL;
    for (c = 0; c < 256; c++) {
        if (CLS[c] & (K_DIGIT | K_HEXL))
            CLS[c] |= K_HEX;
        LOWER[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    CLS['_'] |= K_WORD;
    static const char spaces[] = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f";
    for (const char *p = spaces; *p; p++)
        CLS[(unsigned char)*p] |= K_SPACE | K_PIDSEP;
    CLS['-'] |= K_DASH;
    CLS[':'] |= K_COLON | K_PIDSEP;
    CLS['='] |= K_PIDSEP;
    CLS['#'] |= K_PIDSEP;
}

typedef const unsigned char *Text;

#define AT(s, n, i) ((i) < (n) ? (s)[(i)] : 0)
#define IS(s, n, i, k) ((CLS[AT(s, n, i)] & (k)) != 0)
#define IS_WORD(s, n, i) IS(s, n, i, K_WORD)
#define IS_DIGIT(s, n, i) IS(s, n, i, K_DIGIT)
#define IS_HEX(s, n, i) IS(s, n, i, K_DIGIT | K_HEXL)
/* \b before position i whose character is a word character: none before it. */
#define WORD_START(s, n, i) ((i) == 0 || !IS_WORD(s, n, (i)-1))
/* \b at position e whose previous character is a word character: none at it. */
#define WORD_END(s, n, e) (!IS_WORD(s, n, e))

static Py_ssize_t
digits_end(Text s, Py_ssize_t n, Py_ssize_t i)
{
    while (i < n && (CLS[s[i]] & K_DIGIT))
        i++;
    return i;
}

/* The first digit at or after i (n if none). Eight bytes at a time: in ASCII (every byte below
 * 0x80, so no carry crosses a byte) b + 0x50 has its top bit set when b >= '0', b + 0x46 when
 * b > '9'. A word holding a digit is then searched byte by byte. */
static Py_ssize_t
next_digit(Text s, Py_ssize_t n, Py_ssize_t i)
{
    const uint64_t ones = 0x0101010101010101u;
    while (i + 8 <= n) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (((x + 0x50 * ones) & ~(x + 0x46 * ones) & (0x80 * ones)) != 0)
            break;
        i += 8;
    }
    while (i < n && !(CLS[s[i]] & K_DIGIT))
        i++;
    return i;
}

static int
all_of(Text s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t count, unsigned char kind)
{
    for (Py_ssize_t k = 0; k < count; k++)
        if (!IS(s, n, i + k, kind))
            return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* A pass's output: built only once a match is found. */

typedef struct {
    Text s;           /* the pass's input */
    Py_ssize_t n;
    char *out;        /* PyMem buffer, NULL until the first match */
    Py_ssize_t len, cap;
    Py_ssize_t copied; /* input up to here is in out */
} Pass;

static int
put(Pass *p, const char *src, Py_ssize_t k)
{
    if (k > p->cap - p->len) {
        Py_ssize_t need = p->len + k;
        Py_ssize_t cap = p->cap > 0 ? p->cap : 64;
        while (cap < need) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                cap = need;
                break;
            }
            cap *= 2;
        }
        char *grown = PyMem_Realloc(p->out, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->out = grown;
        p->cap = cap;
    }
    memcpy(p->out + p->len, src, (size_t)k);
    p->len += k;
    return 0;
}

static int
replace(Pass *p, Py_ssize_t start, Py_ssize_t end, const char *placeholder)
{
    if (p->out == NULL) {
        /* The output is about as long as the input: one allocation in most cases. */
        Py_ssize_t cap = p->n + 64;
        p->out = PyMem_Malloc((size_t)cap);
        if (p->out == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->cap = cap;
    }
    if (put(p, (const char *)p->s + p->copied, start - p->copied) < 0)
        return -1;
    if (put(p, placeholder, (Py_ssize_t)strlen(placeholder)) < 0)
        return -1;
    p->copied = end;
    return 0;
}

/* The text a chain of passes works on: the original's bytes, or a pass's output it owns. */
typedef struct {
    Text s;
    Py_ssize_t n;
    char *owned;
} Current;

/* Ends a pass: on a match, its output becomes the current text. 0, or -1 with an error set. */
static int
finish(Pass *p, Current *cur, int failed)
{
    if (failed) {
        PyMem_Free(p->out);
        return -1;
    }
    if (p->out == NULL)
        return 0;
    if (put(p, (const char *)p->s + p->copied, p->n - p->copied) < 0) {
        PyMem_Free(p->out);
        return -1;
    }
    PyMem_Free(cur->owned);
    cur->owned = p->out;
    cur->s = (Text)p->out;
    cur->n = p->len;
    return 0;
}

static void
start_pass(Pass *p, const Current *cur)
{
    p->s = cur->s;
    p->n = cur->n;
    p->out = NULL;
    p->len = p->cap = p->copied = 0;
}

/* ---------------------------------------------------------------------------------------- */
/* uuid: \b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b
 * Fixed length, no choice to backtrack into. */

static Py_ssize_t
match_uuid(Text s, Py_ssize_t n, Py_ssize_t i)
{
    if (i + 36 > n || !WORD_START(s, n, i))
        return -1;
    static const signed char shape[5] = {8, 4, 4, 4, 12};
    Py_ssize_t j = i;
    for (int g = 0; g < 5; g++) {
        if (g > 0) {
            if (s[j] != '-')
                return -1;
            j++;
        }
        if (!all_of(s, n, j, shape[g], K_DIGIT | K_HEXL))
            return -1;
        j += shape[g];
    }
    return WORD_END(s, n, j) ? j : -1;
}

/* timestamp: \b\d{4}-\d{2}-\d{2}[T ]\d{2}([:_])\d{2}(?:\1\d{2}(?:[.,_]\d+)?)?
 *            (?:Z|[+-]\d{2}:?\d{2})?\b
 * After the fixed 16 characters, the ends re would try, in its order: the seconds group with
 * its fraction (\d+ from its longest), the seconds without it, no seconds; at each, the zone
 * Z, then [+-]dd:dd, then [+-]dddd, then none; the first end followed by a non-word character
 * (every candidate end follows a word character) is the match. */

static Py_ssize_t
zone_then_end(Text s, Py_ssize_t n, Py_ssize_t a)
{
    if (AT(s, n, a) == 'Z') {
        if (WORD_END(s, n, a + 1))
            return a + 1;
    }
    else if (AT(s, n, a) == '+' || AT(s, n, a) == '-') {
        if (all_of(s, n, a + 1, 2, K_DIGIT)) {
            if (AT(s, n, a + 3) == ':' && all_of(s, n, a + 4, 2, K_DIGIT) &&
                WORD_END(s, n, a + 6))
                return a + 6;
            if (all_of(s, n, a + 3, 2, K_DIGIT) && WORD_END(s, n, a + 5))
                return a + 5;
        }
    }
    return WORD_END(s, n, a) ? a : -1;
}

static Py_ssize_t
match_timestamp(Text s, Py_ssize_t n, Py_ssize_t i)
{
    if (i + 16 > n || !WORD_START(s, n, i))
        return -1;
    Text t = s + i;
    if (!(all_of(s, n, i, 4, K_DIGIT) && t[4] == '-' && all_of(s, n, i + 5, 2, K_DIGIT) &&
          t[7] == '-' && all_of(s, n, i + 8, 2, K_DIGIT) && (t[10] == 'T' || t[10] == ' ') &&
          all_of(s, n, i + 11, 2, K_DIGIT) && (t[13] == ':' || t[13] == '_') &&
          all_of(s, n, i + 14, 2, K_DIGIT)))
        return -1;
    Py_ssize_t p = i + 16, e;
    unsigned char sep = t[13];
    if (AT(s, n, p) == sep && all_of(s, n, p + 1, 2, K_DIGIT)) {
        Py_ssize_t a = p + 3;
        unsigned char f = AT(s, n, a);
        if ((f == '.' || f == ',' || f == '_') && IS_DIGIT(s, n, a + 1)) {
            Py_ssize_t last = digits_end(s, n, a + 1);
            /* \d+ from its longest; a shorter one is followed by a digit: no zone, no \b. */
            for (Py_ssize_t k = last; k > a + 1; k--) {
                e = zone_then_end(s, n, k);
                if (e >= 0)
                    return e;
            }
        }
        e = zone_then_end(s, n, a);
        if (e >= 0)
            return e;
    }
    return zone_then_end(s, n, p);
}

/* hex: \b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{16,}\b
 * At a word start, the match can only be the whole run of hex characters (a shorter one is
 * followed by a hex character: no \b); the lookaheads see that run: a letter and a digit in
 * it. Inside a run no position is a word start, so each run is tried once: the run around each
 * digit not in a run already tried. */

static int
pass_hex(Current *cur)
{
    Pass p;
    start_pass(&p, cur);
    Text s = p.s;
    Py_ssize_t n = p.n, done = 0; /* the runs before done are tried */
    for (Py_ssize_t d = next_digit(s, n, 0); d < n; d = next_digit(s, n, done)) {
        Py_ssize_t a = d, b = d;
        unsigned char seen = 0;
        while (a > done && (CLS[s[a - 1]] & K_HEX))
            seen |= CLS[s[--a]];
        while (b < n && (CLS[s[b]] & K_HEX))
            seen |= CLS[s[b++]];
        if (b - a >= 16 && (seen & K_HEXL) && WORD_START(s, n, a) && WORD_END(s, n, b)) {
            if (replace(&p, a, b, "<hex>") < 0)
                return finish(&p, cur, 1);
        }
        done = b;
    }
    return finish(&p, cur, 0);
}

/* clock: \b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b
 * \d{1,2} has one way to reach the colon; the fraction's \d+ from its longest (a shorter one is
 * followed by a digit); without the fraction, the [.,] after the seconds is the \b. */

static Py_ssize_t
match_clock(Text s, Py_ssize_t n, Py_ssize_t i)
{
    if (!IS_DIGIT(s, n, i) || !WORD_START(s, n, i))
        return -1;
    Py_ssize_t j = IS_DIGIT(s, n, i + 1) ? i + 2 : i + 1;
    if (!(AT(s, n, j) == ':' && all_of(s, n, j + 1, 2, K_DIGIT) && AT(s, n, j + 3) == ':' &&
          all_of(s, n, j + 4, 2, K_DIGIT)))
        return -1;
    Py_ssize_t e = j + 6;
    unsigned char f = AT(s, n, e);
    if ((f == '.' || f == ',') && IS_DIGIT(s, n, e + 1)) {
        Py_ssize_t last = digits_end(s, n, e + 1);
        if (WORD_END(s, n, last))
            return last;
        return e; /* followed by the point: a word end */
    }
    return WORD_END(s, n, e) ? e : -1;
}

/* duration: \b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h|hrs|hours)\b
 * Each \d+ only from its longest, the fraction only when there (without it, a point would have
 * to be a space or a unit), one space only when there: then the unit, which a \b must end,
 * is the whole run of word characters after that point (µs is not ASCII). */

static int
is_unit(Text u, Py_ssize_t k)
{
    static const char *const units[] = {"ns",  "us",   "ms",      "s", "sec", "secs",
                                        "seconds", "m", "min", "mins", "minutes", "h",
                                        "hrs", "hours"};
    for (size_t q = 0; q < sizeof units / sizeof units[0]; q++)
        if ((Py_ssize_t)strlen(units[q]) == k && memcmp(u, units[q], (size_t)k) == 0)
            return 1;
    return 0;
}

static Py_ssize_t
match_duration(Text s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = digits_end(s, n, i);
    if (AT(s, n, j) == '.' && IS_DIGIT(s, n, j + 1))
        j = digits_end(s, n, j + 1);
    if (IS(s, n, j, K_SPACE))
        j++;
    Py_ssize_t e = j;
    while (e < n && (CLS[s[e]] & K_WORD))
        e++;
    return e - j >= 1 && e - j <= 7 && is_unit(s + j, e - j) ? e : -1;
}

/* Which keyword passes (below) can match: for each run of digits, whether its keyword is right
 * before it (through the separators its pattern allows, word boundaries not checked). */
enum { KW_PID = 1, KW_ATTEMPT = 2, KW_LINE = 4 };

static unsigned int
keywords_before(Text s, Py_ssize_t n, Py_ssize_t d);

static int
pass_duration(Current *cur, unsigned int *keywords)
{
    Pass p;
    start_pass(&p, cur);
    Text s = p.s;
    Py_ssize_t n = p.n, i = 0;
    while ((i = next_digit(s, n, i)) < n) {
        /* i starts a run of digits: a keyword pass can only match at such a run, and one that
         * survives this pass is visited here (its characters are left as they are). */
        *keywords |= keywords_before(s, n, i);
        if (WORD_START(s, n, i)) {
            Py_ssize_t e = match_duration(s, n, i);
            if (e >= 0) {
                if (replace(&p, i, e, "<duration>") < 0)
                    return finish(&p, cur, 1);
                i = e;
                continue;
            }
        }
        i = digits_end(s, n, i); /* no word start inside a run of digits */
    }
    return finish(&p, cur, 0);
}

/* The passes whose matches hold a fixed character at a fixed offset (uuid, timestamp: a hyphen;
 * clock: a colon): memchr finds it, and each start it allows is tried in order. */

typedef Py_ssize_t (*Matcher)(Text, Py_ssize_t, Py_ssize_t);

static int
pass_anchored(Current *cur, Matcher match, int anchor, const Py_ssize_t *offsets, int count,
              const char *placeholder)
{
    Pass p;
    start_pass(&p, cur);
    Text s = p.s;
    Py_ssize_t n = p.n, pos = 0; /* matches start at pos or later */
    Py_ssize_t from = offsets[count - 1]; /* the offsets in decreasing order */
    while (from < n) {
        const unsigned char *hit = memchr(s + from, anchor, (size_t)(n - from));
        if (hit == NULL)
            break;
        Py_ssize_t d = hit - s, end = -1;
        for (int k = 0; k < count && end < 0; k++) {
            Py_ssize_t i = d - offsets[k];
            if (i < pos)
                continue;
            end = match(s, n, i);
            if (end >= 0) {
                if (replace(&p, i, end, placeholder) < 0)
                    return finish(&p, cur, 1);
                pos = end;
            }
        }
        from = end >= 0 ? end + offsets[count - 1] : d + 1;
    }
    return finish(&p, cur, 0);
}

/* pid: \b(?i:pid)\b[\s:=#]*\d+     attempt: \b(?i:attempt)\b\s*#?\d+     line: \bline \d+\b
 * Each repeat only from its longest: a shorter one is followed by one of its own characters,
 * which is not a digit (nor a word end after the line number). So a match ends with a whole
 * run of digits, and the separators before that run (the longest run of them) lead back to the
 * keyword: each run of digits, in order, is checked backwards, from its first digit d, for the
 * one match that can end with it (its start, or -1). Matches come out leftmost first: a
 * keyword holds no digit, so a match's start is past the runs of digits before its own. */

static int
ci_word(Text s, Py_ssize_t n, Py_ssize_t i, const char *word, Py_ssize_t k)
{
    if (i < 0 || i + k > n)
        return 0;
    for (Py_ssize_t q = 0; q < k; q++)
        if (LOWER[s[i + q]] != (unsigned char)word[q])
            return 0;
    return 1;
}

static Py_ssize_t
start_pid(Text s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t d)
{
    Py_ssize_t q = d;
    while (q > pos && (CLS[s[q - 1]] & K_PIDSEP))
        q--;
    Py_ssize_t i = q - 3;
    if (i < pos || !ci_word(s, n, i, "pid", 3) || !WORD_START(s, n, i) || !WORD_END(s, n, q))
        return -1;
    return i;
}

static Py_ssize_t
start_attempt(Text s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t d)
{
    Py_ssize_t q = d;
    if (q > pos && s[q - 1] == '#')
        q--;
    while (q > pos && (CLS[s[q - 1]] & K_SPACE))
        q--;
    Py_ssize_t i = q - 7;
    if (i < pos || !ci_word(s, n, i, "attempt", 7) || !WORD_START(s, n, i) ||
        !WORD_END(s, n, q))
        return -1;
    return i;
}

static Py_ssize_t
start_line(Text s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t d)
{
    Py_ssize_t i = d - 5;
    if (i < pos || memcmp(s + i, "line ", 5) != 0 || !WORD_START(s, n, i) ||
        !WORD_END(s, n, digits_end(s, n, d)))
        return -1;
    return i;
}

static unsigned int
keywords_before(Text s, Py_ssize_t n, Py_ssize_t d)
{
    unsigned int found = 0;
    Py_ssize_t q = d;
    while (q > 0 && (CLS[s[q - 1]] & K_PIDSEP))
        q--;
    if (ci_word(s, n, q - 3, "pid", 3))
        found |= KW_PID;
    q = d;
    if (q > 0 && s[q - 1] == '#')
        q--;
    while (q > 0 && (CLS[s[q - 1]] & K_SPACE))
        q--;
    if (ci_word(s, n, q - 7, "attempt", 7))
        found |= KW_ATTEMPT;
    if (d >= 5 && memcmp(s + d - 5, "line ", 5) == 0)
        found |= KW_LINE;
    return found;
}

typedef Py_ssize_t (*Start)(Text, Py_ssize_t, Py_ssize_t, Py_ssize_t);

static int
pass_keyword(Current *cur, Start start, const char *placeholder)
{
    Pass p;
    start_pass(&p, cur);
    Text s = p.s;
    Py_ssize_t n = p.n, pos = 0; /* the end of the last match */
    for (Py_ssize_t d = next_digit(s, n, 0); d < n;) {
        Py_ssize_t end = digits_end(s, n, d), i = start(s, n, pos, d);
        if (i >= 0) {
            if (replace(&p, i, end, placeholder) < 0)
                return finish(&p, cur, 1);
            pos = end;
        }
        d = next_digit(s, n, end);
    }
    return finish(&p, cur, 0);
}

/* ---------------------------------------------------------------------------------------- */

static const Py_ssize_t UUID_AT[] = {8};
static const Py_ssize_t TIMESTAMP_AT[] = {4};
static const Py_ssize_t CLOCK_AT[] = {2, 1};

/* The patterns over an exact str whose text is ASCII (ready): a new reference, the same object
 * when nothing changes, or NULL with an error set. */
static PyObject *
scan_ascii(PyObject *value)
{
    Text s = (Text)PyUnicode_DATA(value);
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);

    /* Every pattern needs a digit, but uuid, which needs a hyphen. The keyword checks the
     * Python path makes on the original text lower-cased (pid, attempt, line) are not needed:
     * a keyword found in the text a pass reads is in the original (a placeholder holds none,
     * and a match holds no '<' or '>' to join one to). */
    int digit = next_digit(s, n, 0) < n;
    if (!digit && memchr(s, '-', (size_t)n) == NULL)
        goto unchanged;

    Current cur = {s, n, NULL};
    if (pass_anchored(&cur, match_uuid, '-', UUID_AT, 1, "<uuid>") < 0)
        goto error;
    if (!digit)
        goto done;
    if (pass_anchored(&cur, match_timestamp, '-', TIMESTAMP_AT, 1, "<timestamp>") < 0)
        goto error;
    if (pass_hex(&cur) < 0)
        goto error;
    if (pass_anchored(&cur, match_clock, ':', CLOCK_AT, 2, "<clock>") < 0)
        goto error;
    unsigned int keywords = 0;
    if (pass_duration(&cur, &keywords) < 0)
        goto error;
    if ((keywords & KW_PID) && pass_keyword(&cur, start_pid, "<pid>") < 0)
        goto error;
    if ((keywords & KW_ATTEMPT) && pass_keyword(&cur, start_attempt, "<attempt>") < 0)
        goto error;
    if ((keywords & KW_LINE) && pass_keyword(&cur, start_line, "<line>") < 0)
        goto error;
done:
    if (cur.owned == NULL)
        goto unchanged;
    PyObject *out = PyUnicode_New(cur.n, 127);
    if (out != NULL)
        memcpy(PyUnicode_DATA(out), cur.s, (size_t)cur.n);
    PyMem_Free(cur.owned);
    return out;
error:
    PyMem_Free(cur.owned);
    return NULL;
unchanged:
    Py_INCREF(value);
    return value;
}

/* 1 when an exact str's text is ASCII, 0 when not, -1 with an error set. */
static int
is_ascii(PyObject *value)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(value) < 0)
        return -1;
#endif
    return PyUnicode_IS_ASCII(value) ? 1 : 0;
}

static PyObject *
scan(PyObject *module, PyObject *value)
{
    (void)module;
    if (!PyUnicode_CheckExact(value))
        Py_RETURN_NONE;
    int ascii = is_ascii(value);
    if (ascii < 0)
        return NULL;
    if (!ascii)
        Py_RETURN_NONE;
    return scan_ascii(value);
}

/* ---------------------------------------------------------------------------------------- */
/* walk(value, other): volatile.VolatileNormalizer.normalize's walk (volatile._Walk) with no
 * user patterns, in C. The same copy: dicts (exact) to dicts with the same keys, lists and
 * tuples (exact) to lists, exact str through the scanner when ASCII and through other(value)
 * otherwise (non-ASCII text, str subclasses), int, float, bool and None as they are; past
 * MAX_DEPTH, and where a container holds itself, containers as they are. Any other value
 * within MAX_DEPTH (a Mapping, a subclass of dict, list or tuple, UNDEFINED, any object) stops
 * the walk: NotImplemented is returned and the caller walks in Python, which knows them. */

#define SHORT 32     /* volatile._SHORT: longer texts are remembered within one walk */
#define MAX_DEPTH 200 /* volatile._MAX_DEPTH */
#define MEMO 8

typedef struct {
    PyObject *other;
    PyObject *seen[MAX_DEPTH + 2]; /* the containers being copied: the path to this one */
    int depth_seen;
    int declined; /* a value the walk leaves to Python */
    /* The last long text of each length modulo MEMO and its result (an exec result holds its
     * output twice); compared by content, so a hit is that text's result. */
    PyObject *memo_in[MEMO], *memo_out[MEMO];
} Walk;

static int
same_text(PyObject *a, PyObject *b)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return PyUnicode_GET_LENGTH(b) == n && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

static PyObject *
walk_text(Walk *w, PyObject *value)
{
    int ascii = is_ascii(value);
    if (ascii < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    int slot = (int)(n % MEMO);
    if (n > SHORT && w->memo_in[slot] != NULL && same_text(w->memo_in[slot], value)) {
        Py_INCREF(w->memo_out[slot]);
        return w->memo_out[slot];
    }
    PyObject *out = ascii ? scan_ascii(value) : PyObject_CallOneArg(w->other, value);
    if (out != NULL && n > SHORT) {
        Py_XSETREF(w->memo_in[slot], Py_NewRef(value));
        Py_XSETREF(w->memo_out[slot], Py_NewRef(out));
    }
    return out;
}

static PyObject *walk_value(Walk *w, PyObject *value, int depth);

static PyObject *
walk_dict(Walk *w, PyObject *value, int depth)
{
    PyObject *out = PyDict_New(), *key, *item;
    Py_ssize_t pos = 0;
    if (out == NULL)
        return NULL;
    while (PyDict_Next(value, &pos, &key, &item)) {
        /* Held while other() runs Python code, which another thread may use to change the
         * dict: a borrowed key or value could be freed meanwhile. */
        Py_INCREF(key);
        Py_INCREF(item);
        PyObject *copy = walk_value(w, item, depth);
        int failed = copy == NULL || PyDict_SetItem(out, key, copy) < 0;
        Py_XDECREF(copy);
        Py_DECREF(item);
        Py_DECREF(key);
        if (failed) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *
walk_sequence(Walk *w, PyObject *value, int depth)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PySequence_Fast_GET_SIZE(value)) {
            /* A list another thread shortened while other() ran: its items up to here. */
            if (PyList_SetSlice(out, i, n, NULL) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            break;
        }
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(value, i)); /* as in walk_dict */
        PyObject *copy = walk_value(w, item, depth);
        Py_DECREF(item);
        if (copy == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, copy);
    }
    return out;
}

static PyObject *
walk_value(Walk *w, PyObject *value, int depth)
{
    PyTypeObject *kind = Py_TYPE(value);
    if (kind == &PyUnicode_Type)
        return walk_text(w, value);
    if (kind == &PyLong_Type || kind == &PyFloat_Type || kind == &PyBool_Type ||
        value == Py_None)
        return Py_NewRef(value);
    if (PyUnicode_Check(value)) /* a subclass: it may compare or hash in its own way */
        return PyObject_CallOneArg(w->other, value);
    if (depth > MAX_DEPTH)
        return Py_NewRef(value);
    if (kind != &PyDict_Type && kind != &PyList_Type && kind != &PyTuple_Type) {
        w->declined = 1;
        return NULL;
    }
    for (int k = 0; k < w->depth_seen; k++)
        if (w->seen[k] == value)
            return Py_NewRef(value);
    w->seen[w->depth_seen++] = value;
    PyObject *out = kind == &PyDict_Type ? walk_dict(w, value, depth + 1)
                                         : walk_sequence(w, value, depth + 1);
    w->depth_seen--;
    return out;
}

static PyObject *
walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "walk() takes exactly 2 arguments");
        return NULL;
    }
    Walk w;
    memset(&w, 0, sizeof w);
    w.other = args[1];
    PyObject *out = walk_value(&w, args[0], 0);
    for (int k = 0; k < MEMO; k++) {
        Py_XDECREF(w.memo_in[k]);
        Py_XDECREF(w.memo_out[k]);
    }
    if (out == NULL && w.declined && !PyErr_Occurred())
        Py_RETURN_NOTIMPLEMENTED;
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(value, /)\n--\n\nThe built-in volatile patterns applied to an exact str of ASCII "
     "text (what loopwarden.core.volatile.builtin_text gives; the same object when nothing "
     "changes), or None for any other value."},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(value, other, /)\n--\n\nVolatileNormalizer.normalize's copy of a structure with "
     "no user patterns, other(text) giving the text of strings that are not ASCII or not an "
     "exact str; NotImplemented for a structure holding other kinds of values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "loopwarden.core._volatile_scan",
    "The recommended profile's built-in volatile patterns over ASCII text, in C.",
    0,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__volatile_scan(void)
{
    init_classes();
    return PyModule_Create(&module_def);
}
