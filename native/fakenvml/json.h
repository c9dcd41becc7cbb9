/*
 * json.h - a small, bounds-checked JSON reader/writer for the fake NVML.
 *
 * Why our own: the fake library must build with nothing but a C compiler, and
 * its config errors must name the line and column.  The reader builds a tree
 * in one arena (freed with json_free); the writer appends to a growable buffer.
 */
#ifndef FAKENVML_JSON_H
#define FAKENVML_JSON_H

#pragma GCC visibility push(hidden)

#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_member;

struct json_value {
    enum json_type type;
    int line, column;            /* where the value starts (1-based) */
    union {
        int boolean;
        struct {
            int is_integer;      /* no fraction/exponent and fits in int64 */
            int64_t integer;
            double real;
        } number;
        struct {
            char *chars;         /* NUL-terminated UTF-8 (may hold embedded NULs: see len) */
            size_t len;
        } string;
        struct {
            struct json_value *items;
            size_t count;
        } array;
        struct {
            struct json_member *members;
            size_t count;
        } object;
    } u;
};

struct json_member {
    const char *key;
    size_t key_len;
    struct json_value value;
};

struct json_doc {
    struct json_value *root;
    void *arena;                 /* owned allocations */
};

/* Parse `len` bytes.  On error returns -1 and writes "line L, column C: what" to err. */
int json_parse(const char *text, size_t len, struct json_doc *doc, char *err, size_t errlen);
void json_free(struct json_doc *doc);

/* Member lookup (NULL when absent). */
const struct json_value *json_get(const struct json_value *obj, const char *key);

/* Growable output buffer for the writer. */
struct json_buf {
    char *data;
    size_t len, cap;
    int failed;                  /* allocation failure: contents are unusable */
};

void jb_init(struct json_buf *b);
void jb_free(struct json_buf *b);
void jb_raw(struct json_buf *b, const char *s);
void jb_printf(struct json_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jb_string(struct json_buf *b, const char *s); /* quoted and escaped */

#pragma GCC visibility pop

#endif
