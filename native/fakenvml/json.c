/* json.c - see json.h.  RFC 8259 subset: no comments, no trailing commas. */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct arena {
    void **ptrs;
    size_t count, cap;
};

struct parser {
    const char *p, *end, *start;
    int line;
    const char *line_start;
    int depth;
    struct arena *arena;
    char *err;
    size_t errlen;
};

static int arena_keep(struct arena *a, void *ptr)
{
    if (a->count == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **n = realloc(a->ptrs, cap * sizeof(*n));
        if (!n)
            return -1;
        a->ptrs = n;
        a->cap = cap;
    }
    a->ptrs[a->count++] = ptr;
    return 0;
}

static void arena_free(struct arena *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->count; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
    free(a);
}

static int column(const struct parser *ps, const char *at)
{
    return (int)(at - ps->line_start) + 1;
}

static int fail_at(struct parser *ps, const char *at, const char *what)
{
    if (ps->err && ps->err[0] == '\0')
        snprintf(ps->err, ps->errlen, "line %d, column %d: %s", ps->line, column(ps, at), what);
    return -1;
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->p++;
            ps->line_start = ps->p;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
        } else {
            break;
        }
    }
}

static int parse_value(struct parser *ps, struct json_value *out);

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex4(struct parser *ps, const char *at, unsigned *out)
{
    if (ps->end - at < 4)
        return fail_at(ps, at, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(at[i]);
        if (h < 0)
            return fail_at(ps, at + i, "invalid hex digit in \\u escape");
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 0;
}

static size_t utf8_put(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ps->p points at the opening quote. */
static int parse_string(struct parser *ps, char **chars, size_t *len)
{
    const char *open = ps->p;
    ps->p++;
    /* The decoded string is never longer than the raw one. */
    const char *q = ps->p;
    while (q < ps->end && *q != '"') {
        if (*q == '\\' && ps->end - q < 2)
            break;
        q += (*q == '\\') ? 2 : 1;
    }
    if (q >= ps->end)
        return fail_at(ps, open, "unterminated string");
    size_t raw = (size_t)(q - ps->p);
    char *buf = malloc(raw + 1);
    if (!buf || arena_keep(ps->arena, buf) != 0) {
        free(buf);
        return fail_at(ps, open, "out of memory");
    }
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20)
            return fail_at(ps, ps->p, "control character in string");
        if (c != '\\') {
            buf[n++] = (char)c;
            ps->p++;
            continue;
        }
        const char *esc = ps->p;
        ps->p++;
        if (ps->p >= ps->end)
            return fail_at(ps, esc, "truncated escape");
        char e = *ps->p++;
        switch (e) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (read_hex4(ps, ps->p, &cp) != 0)
                return -1;
            ps->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
                    return fail_at(ps, esc, "unpaired surrogate in \\u escape");
                if (read_hex4(ps, ps->p + 2, &lo) != 0)
                    return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(ps, esc, "unpaired surrogate in \\u escape");
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail_at(ps, esc, "unpaired surrogate in \\u escape");
            }
            /* 6 raw bytes (or 12 for a pair) always cover the <= 4 encoded bytes. */
            n += utf8_put(buf + n, cp);
            break;
        }
        default:
            return fail_at(ps, esc, "invalid escape in string");
        }
    }
    ps->p++; /* closing quote */
    buf[n] = '\0';
    *chars = buf;
    *len = n;
    return 0;
}

static int parse_number(struct parser *ps, struct json_value *out)
{
    const char *s = ps->p;
    const char *q = s;
    int integer = 1;
    if (q < ps->end && *q == '-')
        q++;
    if (q >= ps->end || *q < '0' || *q > '9')
        return fail_at(ps, s, "invalid number");
    if (*q == '0') {
        q++;
        if (q < ps->end && *q >= '0' && *q <= '9')
            return fail_at(ps, s, "leading zero in number");
    } else {
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && *q == '.') {
        integer = 0;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail_at(ps, s, "invalid number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        integer = 0;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail_at(ps, s, "invalid number");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    size_t n = (size_t)(q - s);
    char tmp[64];
    if (n >= sizeof(tmp))
        return fail_at(ps, s, "number too long");
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    out->type = JSON_NUMBER;
    out->u.number.is_integer = 0;
    out->u.number.integer = 0;
    if (integer) {
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            out->u.number.is_integer = 1;
            out->u.number.integer = v;
        }
    }
    out->u.number.real = strtod(tmp, NULL);
    ps->p = q;
    return 0;
}

static int literal(struct parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail_at(ps, ps->p, "unexpected character");
    ps->p += n;
    return 0;
}

static int parse_array(struct parser *ps, struct json_value *out)
{
    ps->p++; /* [ */
    struct json_value *items = NULL;
    size_t count = 0, cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        goto done;
    }
    for (;;) {
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct json_value *n = realloc(items, ncap * sizeof(*n));
            if (!n) {
                free(items);
                return fail_at(ps, ps->p, "out of memory");
            }
            items = n;
            cap = ncap;
        }
        skip_ws(ps);
        if (parse_value(ps, &items[count]) != 0) {
            free(items);
            return -1;
        }
        count++;
        skip_ws(ps);
        if (ps->p >= ps->end) {
            free(items);
            return fail_at(ps, ps->p, "unexpected end of input in array");
        }
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == ']') {
            ps->p++;
            break;
        }
        free(items);
        return fail_at(ps, ps->p, "expected ',' or ']'");
    }
done:
    if (items && arena_keep(ps->arena, items) != 0) {
        free(items);
        return fail_at(ps, ps->p, "out of memory");
    }
    out->type = JSON_ARRAY;
    out->u.array.items = items;
    out->u.array.count = count;
    return 0;
}

static int parse_object(struct parser *ps, struct json_value *out)
{
    ps->p++; /* { */
    struct json_member *members = NULL;
    size_t count = 0, cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        goto done;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            free(members);
            return fail_at(ps, ps->p, "expected a string key");
        }
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct json_member *n = realloc(members, ncap * sizeof(*n));
            if (!n) {
                free(members);
                return fail_at(ps, ps->p, "out of memory");
            }
            members = n;
            cap = ncap;
        }
        const char *key_at = ps->p;
        char *key;
        size_t key_len;
        if (parse_string(ps, &key, &key_len) != 0) {
            free(members);
            return -1;
        }
        for (size_t i = 0; i < count; i++) {
            if (members[i].key_len == key_len && memcmp(members[i].key, key, key_len) == 0) {
                char msg[160];
                snprintf(msg, sizeof(msg), "duplicate key \"%.100s\"", key);
                free(members);
                return fail_at(ps, key_at, msg);
            }
        }
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            free(members);
            return fail_at(ps, ps->p, "expected ':' after key");
        }
        ps->p++;
        skip_ws(ps);
        members[count].key = key;
        members[count].key_len = key_len;
        if (parse_value(ps, &members[count].value) != 0) {
            free(members);
            return -1;
        }
        count++;
        skip_ws(ps);
        if (ps->p >= ps->end) {
            free(members);
            return fail_at(ps, ps->p, "unexpected end of input in object");
        }
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            break;
        }
        free(members);
        return fail_at(ps, ps->p, "expected ',' or '}'");
    }
done:
    if (members && arena_keep(ps->arena, members) != 0) {
        free(members);
        return fail_at(ps, ps->p, "out of memory");
    }
    out->type = JSON_OBJECT;
    out->u.object.members = members;
    out->u.object.count = count;
    return 0;
}

static int parse_value(struct parser *ps, struct json_value *out)
{
    memset(out, 0, sizeof(*out));
    if (ps->p >= ps->end)
        return fail_at(ps, ps->p, "unexpected end of input");
    out->line = ps->line;
    out->column = column(ps, ps->p);
    if (ps->depth >= JSON_MAX_DEPTH)
        return fail_at(ps, ps->p, "nesting too deep");
    int rc;
    switch (*ps->p) {
    case '{':
        ps->depth++;
        rc = parse_object(ps, out);
        ps->depth--;
        return rc;
    case '[':
        ps->depth++;
        rc = parse_array(ps, out);
        ps->depth--;
        return rc;
    case '"':
        out->type = JSON_STRING;
        return parse_string(ps, &out->u.string.chars, &out->u.string.len);
    case 't':
        out->type = JSON_BOOL;
        out->u.boolean = 1;
        return literal(ps, "true");
    case 'f':
        out->type = JSON_BOOL;
        out->u.boolean = 0;
        return literal(ps, "false");
    case 'n':
        out->type = JSON_NULL;
        return literal(ps, "null");
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, out);
        return fail_at(ps, ps->p, "unexpected character");
    }
}

int json_parse(const char *text, size_t len, struct json_doc *doc, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    doc->root = NULL;
    doc->arena = NULL;
    struct arena *arena = calloc(1, sizeof(*arena));
    struct json_value *root = malloc(sizeof(*root));
    if (!arena || !root || arena_keep(arena, root) != 0) {
        free(root);
        arena_free(arena);
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct parser ps = {
        .p = text, .end = text + len, .start = text, .line = 1, .line_start = text,
        .depth = 0, .arena = arena, .err = err, .errlen = errlen,
    };
    skip_ws(&ps);
    if (ps.p >= ps.end) {
        fail_at(&ps, ps.p, "empty document");
        arena_free(arena);
        return -1;
    }
    if (parse_value(&ps, root) != 0) {
        arena_free(arena);
        return -1;
    }
    skip_ws(&ps);
    if (ps.p < ps.end) {
        fail_at(&ps, ps.p, "unexpected data after the JSON value");
        arena_free(arena);
        return -1;
    }
    doc->root = root;
    doc->arena = arena;
    return 0;
}

void json_free(struct json_doc *doc)
{
    if (!doc)
        return;
    arena_free(doc->arena);
    doc->arena = NULL;
    doc->root = NULL;
}

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->u.object.count; i++) {
        const struct json_member *m = &obj->u.object.members[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0)
            return &m->value;
    }
    return NULL;
}

/* ------------------------------------------------------------------ writer */

void jb_init(struct json_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void jb_free(struct json_buf *b)
{
    free(b->data);
    jb_init(b);
}

static int jb_reserve(struct json_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *n = realloc(b->data, cap);
    if (!n) {
        b->failed = 1;
        return -1;
    }
    b->data = n;
    b->cap = cap;
    return 0;
}

void jb_raw(struct json_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (jb_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void jb_printf(struct json_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || jb_reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void jb_string(struct json_buf *b, const char *s)
{
    jb_raw(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            esc[2] = '\0';
        } else if (*p < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            esc[1] = '\0';
        }
        jb_raw(b, esc);
    }
    jb_raw(b, "\"");
}
