/*
 * proxy._ledger_native: the decision ledger's row encoder for the usual case, in C
 * (this file), and the completion types built on it (_ledger_completion.c).
 *
 * rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer,
 *      version, contexts, make_context)
 * writes the JSON line of one ledger entry (schema v2: the entry's fields, then
 * one array per partition) into the bytearray ``out`` from ``pos``, byte for
 * byte what proxy.ledger_rows.RowFormatter.python_lines writes for it, and
 * returns the new end (``pos`` for an entry without partitions); -1 when ``out``
 * has no room for it (nothing meaningful was written); None when this entry is
 * not the usual case: the caller then uses the Python encoder, which stays the
 * reference and handles every case.
 *
 * ``spans`` is a list of each decision's record-set span ((start, end) or None),
 * or, when the decisions are every partition of the request in its order, the
 * request's tuple of TopicData, whose partitions' ``records`` are read here
 * (no list built per request).
 *
 * The usual case: the broker's answer (if any) is a well-formed Produce v3-v13
 * response whose partitions are exactly the entry's forwarded decisions, in
 * the same order. Anything else (a malformed, truncated or reordered answer,
 * a duplicate, a missing partition) returns None: this code never decides
 * what a malformed frame means, it only declines.
 *
 * Invariants: every read of a frame is bounds-checked against its length;
 * the GIL is held throughout (frames are immutable bytes-backed buffers);
 * errors raised by Python callbacks propagate as exceptions.
 */
#include "_ledger_native.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define BATCH_HEADER_SIZE 61
#define BATCH_LENGTH_OVERHEAD 12
#define FIRST_LOG_START_OFFSET_VERSION 5
#define FIRST_RECORD_ERRORS_VERSION 8
#define FIRST_FLEXIBLE_VERSION 9
#define FIRST_TOPIC_ID_VERSION 13

typedef struct {
    const unsigned char *key;
    Py_ssize_t key_len;
    int32_t index;
    int16_t error;
    int64_t offset;
    Py_ssize_t topic;
} result_t;

#define MAX_PAIRWISE_TOPICS 16
#define MAX_CHECKED_PARTITION 65536

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos, end;
    int ok;
} reader_t;

static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int16_t be16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

static int need(reader_t *r, Py_ssize_t n) {
    if (!r->ok || n < 0 || r->end - r->pos < n) {
        r->ok = 0;
        return 0;
    }
    return 1;
}

static void skip(reader_t *r, Py_ssize_t n) {
    if (need(r, n))
        r->pos += n;
}

/* At most 5 bytes, like protocol.primitives.read_uvarint (so up to 35 bits). */
static int64_t uvarint(reader_t *r) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (!need(r, 1))
            return -1;
        unsigned char b = r->p[r->pos++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            return (int64_t)result;
    }
    r->ok = 0;
    return -1;
}

/* A length: compact (an unsigned varint, minus one) or big-endian of ``width`` bytes. */
static int64_t raw_length(reader_t *r, int flexible, int width) {
    if (flexible)
        return uvarint(r) - 1;
    if (!need(r, width))
        return -1;
    int64_t n = width == 4 ? be32(r->p + r->pos) : be16(r->p + r->pos);
    r->pos += width;
    return n;
}

/* A non-null array length that cannot exceed the bytes left. */
static Py_ssize_t array_len(reader_t *r, int flexible) {
    int64_t n = raw_length(r, flexible, 4);
    if (!r->ok || n < 0 || n > r->end - r->pos) {
        r->ok = 0;
        return -1;
    }
    return (Py_ssize_t)n;
}

/* A string's bytes (nullable or not); its length, or -1 for null. */
static Py_ssize_t string_len(reader_t *r, int flexible) {
    int64_t n = raw_length(r, flexible, 2);
    if (!r->ok || n < -1) {
        r->ok = 0;
        return -1;
    }
    return (Py_ssize_t)n;
}

static void skip_nullable_string(reader_t *r, int flexible) {
    Py_ssize_t n = string_len(r, flexible);
    if (n > 0)
        skip(r, n);
}

static void skip_tags(reader_t *r) {
    int64_t count = uvarint(r);
    for (int64_t i = 0; r->ok && i < count; i++) {
        uvarint(r); /* tag */
        int64_t size = uvarint(r);
        if (r->ok)
            skip(r, (Py_ssize_t)size);
    }
}

static int compare_keys(const void *a, const void *b) {
    const result_t *x = *(const result_t *const *)a, *y = *(const result_t *const *)b;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return memcmp(x->key, y->key, (size_t)x->key_len);
}

/* Is a topic named twice among the answer's topics (each given by its first result)? */
static int topic_repeated(const result_t **firsts, Py_ssize_t n) {
    if (n <= MAX_PAIRWISE_TOPICS) {
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (compare_keys(&firsts[i], &firsts[j]) == 0)
                    return 1;
        return 0;
    }
    qsort(firsts, (size_t)n, sizeof(firsts[0]), compare_keys);
    for (Py_ssize_t i = 1; i < n; i++)
        if (compare_keys(&firsts[i - 1], &firsts[i]) == 0)
            return 1;
    return 0;
}

/* No (topic, partition) answered twice: with a duplicate, the Python encoder's
   mapping keeps the last answer, and in-order matching would not. Declines
   (returns 0) for a partition index outside 0..MAX_CHECKED_PARTITION-1. Returns -1
   with an exception set when out of memory. */
static int all_distinct(const result_t *results, Py_ssize_t n) {
    static unsigned char seen[MAX_CHECKED_PARTITION / 8]; /* all clear between calls */
    const result_t **firsts = PyMem_Malloc(sizeof(result_t *) * (size_t)(n ? n : 1));
    Py_ssize_t n_firsts = 0, group = 0;
    int distinct = 1;
    if (firsts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n && distinct; i++) {
        const result_t *r = &results[i];
        if (i == 0 || r->topic != results[i - 1].topic) {
            firsts[n_firsts++] = r;
            for (Py_ssize_t j = group; j < i; j++) /* clear the previous topic's bits */
                seen[results[j].index >> 3] = 0;
            group = i;
        }
        if (r->index < 0 || r->index >= MAX_CHECKED_PARTITION)
            distinct = 0;
        else if (seen[r->index >> 3] & (1 << (r->index & 7)))
            distinct = 0;
        else
            seen[r->index >> 3] |= (unsigned char)(1 << (r->index & 7));
    }
    for (Py_ssize_t j = group; j < n; j++)
        if (results[j].index >= 0 && results[j].index < MAX_CHECKED_PARTITION)
            seen[results[j].index >> 3] = 0;
    if (distinct && topic_repeated(firsts, n_firsts))
        distinct = 0;
    PyMem_Free(firsts);
    return distinct;
}

/* The answer's partitions into *out (PyMem-allocated); their count, or -1 when the
   answer is not a well-formed response of this version. */
static Py_ssize_t read_results(const unsigned char *p, Py_ssize_t len, int version,
                               result_t **out) {
    reader_t r = {p, 0, len, 1};
    int flexible = version >= FIRST_FLEXIBLE_VERSION;
    Py_ssize_t cap = 0, n = 0;
    result_t *results = NULL;
    *out = NULL;
    if (len < 8 || be32(p) != len - 4)
        return -1;
    r.pos = 8; /* size, correlation id */
    if (flexible)
        skip_tags(&r);
    Py_ssize_t n_topics = array_len(&r, flexible);
    for (Py_ssize_t t = 0; r.ok && t < n_topics; t++) {
        const unsigned char *key;
        Py_ssize_t key_len;
        if (version >= FIRST_TOPIC_ID_VERSION) {
            key_len = 16;
        } else {
            key_len = string_len(&r, flexible);
            if (key_len < 0)
                r.ok = 0; /* a null topic name */
        }
        if (!need(&r, key_len))
            break;
        key = p + r.pos;
        r.pos += key_len;
        Py_ssize_t n_parts = array_len(&r, flexible);
        if (r.ok && n_parts == 0 && version < FIRST_TOPIC_ID_VERSION) {
            /* The Python reader refuses a name that is not UTF-8. A name with partitions
               is checked by matching it to a decision's (valid) name; one without is not. */
            PyObject *name = PyUnicode_DecodeUTF8((const char *)key, key_len, "strict");
            if (name == NULL) {
                PyErr_Clear();
                r.ok = 0;
            }
            Py_XDECREF(name);
        }
        for (Py_ssize_t i = 0; r.ok && i < n_parts; i++) {
            if (!need(&r, 4 + 2 + 8 + 8))
                break;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                result_t *grown = PyMem_Realloc(results, (size_t)cap * sizeof(result_t));
                if (grown == NULL) {
                    PyMem_Free(results);
                    PyErr_NoMemory();
                    return -2;
                }
                results = grown;
            }
            const unsigned char *q = p + r.pos;
            results[n].key = key;
            results[n].key_len = key_len;
            results[n].index = be32(q);
            results[n].error = be16(q + 4);
            results[n].offset = be64(q + 6);
            results[n].topic = t;
            n++;
            r.pos += 4 + 2 + 8 + 8; /* index, error, base offset, log append time */
            if (version >= FIRST_LOG_START_OFFSET_VERSION)
                skip(&r, 8);
            if (version >= FIRST_RECORD_ERRORS_VERSION) {
                Py_ssize_t n_errors = array_len(&r, flexible);
                for (Py_ssize_t e = 0; r.ok && e < n_errors; e++) {
                    skip(&r, 4); /* batch index */
                    skip_nullable_string(&r, flexible);
                    if (flexible)
                        skip_tags(&r);
                }
                skip_nullable_string(&r, flexible); /* error message */
            }
            if (flexible)
                skip_tags(&r);
        }
        if (flexible)
            skip_tags(&r);
    }
    skip(&r, 4); /* throttle time */
    if (flexible)
        skip_tags(&r);
    int distinct = r.ok && r.pos == r.end ? all_distinct(results, n) : 0;
    if (distinct != 1) {
        PyMem_Free(results);
        if (distinct < 0)
            return -2;
        return -1;
    }
    *out = results;
    return n;
}

/* Records in a record set (the sum of its batches' counts), or -1 when a batch
   header is one protocol.produce_request.record_count refuses. */
static int64_t record_count(const unsigned char *p, Py_ssize_t len, Py_ssize_t pos,
                            Py_ssize_t end) {
    int64_t total = 0;
    if (!(0 <= pos && pos <= end && end <= len))
        return -1;
    while (pos < end) {
        if (end - pos < BATCH_HEADER_SIZE)
            return -1;
        int32_t length = be32(p + pos + 8);
        if (length < BATCH_HEADER_SIZE - BATCH_LENGTH_OVERHEAD)
            return -1;
        if ((signed char)p[pos + 16] != 2)
            return -1;
        int32_t count = be32(p + pos + 57);
        if (count < 0)
            return -1;
        if ((int64_t)length + BATCH_LENGTH_OVERHEAD > (int64_t)(end - pos))
            return -1;
        total += count;
        pos += BATCH_LENGTH_OVERHEAD + length;
    }
    return total;
}

/* The output: the caller's bytearray from ``len`` on, never past ``cap``. */
typedef struct {
    char *buf;
    size_t len, cap;
} out_t;

static int room(const out_t *o, size_t n) {
    return o->cap - o->len >= n;
}

static void put(out_t *o, const char *s, size_t n) {
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

#define PUT_LITERAL(o, s) put((o), (s), sizeof(s) - 1)

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal, two digits per division (this ran a fifth of the encoder's time). */
static size_t format_int(char *dst, int64_t v) {
    if (v >= 0 && v < 10) {
        *dst = (char)('0' + v);
        return 1;
    }
    char tmp[24];
    int i = 24;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        unsigned pair = (unsigned)(u % 100);
        u /= 100;
        i -= 2;
        memcpy(tmp + i, DIGIT_PAIRS + 2 * pair, 2);
    }
    if (u >= 10) {
        i -= 2;
        memcpy(tmp + i, DIGIT_PAIRS + 2 * u, 2);
    } else {
        tmp[--i] = (char)('0' + u);
    }
    if (v < 0)
        tmp[--i] = '-';
    memcpy(dst, tmp + i, (size_t)(24 - i));
    return (size_t)(24 - i);
}

static void put_int(out_t *o, int64_t v) {
    o->len += format_int(o->buf + o->len, v);
}

/* x * scale rounded half up, written with ``digits`` decimals after dividing by
   10**digits (proxy.ledger_rows.fixed); "null" when not finite. Returns the length
   (at most 40), or 0 when x * scale is beyond the integers a double holds exactly. */
static size_t format_fixed(char *dst, double x, double scale, int digits) {
    if (!isfinite(x)) {
        memcpy(dst, "null", 4);
        return 4;
    }
    double scaled = fabs(x) * scale + 0.5;
    if (scaled >= 9007199254740992.0)
        return 0;
    int64_t n = (int64_t)floor(scaled), unit = 1;
    for (int i = 0; i < digits; i++)
        unit *= 10;
    char *p = dst;
    if (x < 0 && n != 0)
        *p++ = '-';
    p += format_int(p, n / unit);
    *p++ = '.';
    int64_t frac = n % unit;
    for (int i = digits - 1; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return (size_t)(p + digits - dst);
}

/* A forwarded partition's wire error, broker error (the same code) and base offset. */
static void put_answer(out_t *o, const result_t *res) {
    put_int(o, res->error);
    PUT_LITERAL(o, ",");
    put_int(o, res->error);
    PUT_LITERAL(o, ",");
    put_int(o, res->offset);
}

/* Does a decision's topic key (str name or bytes id) equal a topic key read from the answer? */
static int key_equals(PyObject *key, const unsigned char *bytes, Py_ssize_t len) {
    const char *data;
    Py_ssize_t size;
    if (PyUnicode_Check(key)) {
        data = PyUnicode_AsUTF8AndSize(key, &size);
        if (data == NULL) {
            PyErr_Clear(); /* a lone surrogate: cannot be on the wire; decline */
            return 0;
        }
    } else if (PyBytes_Check(key)) {
        data = PyBytes_AS_STRING(key);
        size = PyBytes_GET_SIZE(key);
    } else {
        return 0;
    }
    return size == len && memcmp(data, bytes, (size_t)len) == 0;
}

/* The context (verdict, required racks, row fragment, synthetic code) of decision d,
   borrowed from contexts[topic key][partition], made by make_context(d) when missing
   or made for another verdict. *topic_key and *partitions (strong references) keep
   the previous decision's topic, the usual next one. */
static PyObject *lookup_context(PyObject *contexts, PyObject *make_context, PyObject *d,
                                PyObject **topic_key, PyObject **partitions, long long *made) {
    PyObject *key = PyTuple_GET_ITEM(d, 0), *partition = PyTuple_GET_ITEM(d, 2);
    if (key != *topic_key || *partitions == NULL) {
        PyObject *found = PyDict_GetItemWithError(contexts, key);
        if (found == NULL) {
            if (PyErr_Occurred())
                return NULL;
            found = PyDict_New();
            if (found == NULL)
                return NULL;
            if (PyDict_SetItem(contexts, key, found) < 0) {
                Py_DECREF(found);
                return NULL;
            }
        } else {
            Py_INCREF(found);
        }
        Py_XSETREF(*partitions, found);
        Py_XSETREF(*topic_key, Py_NewRef(key)); /* held: compared by identity */
    }
    PyObject *context = PyDict_GetItemWithError(*partitions, partition);
    if (context == NULL && PyErr_Occurred())
        return NULL;
    if (context != NULL && PyTuple_Check(context) && PyTuple_GET_SIZE(context) == 4 &&
        PyTuple_GET_ITEM(context, 0) == PyTuple_GET_ITEM(d, 3)) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(context, 1), PyTuple_GET_ITEM(d, 4),
                                            Py_EQ);
        if (same < 0)
            return NULL;
        if (same)
            return context;
    }
    (*made)++;
    PyObject *fresh = PyObject_CallOneArg(make_context, d);
    if (fresh == NULL)
        return NULL;
    if (!PyTuple_Check(fresh) || PyTuple_GET_SIZE(fresh) != 4 ||
        !PyBytes_Check(PyTuple_GET_ITEM(fresh, 2))) {
        Py_DECREF(fresh);
        PyErr_SetString(PyExc_TypeError,
                        "rows(): make_context must return (verdict, required, bytes, code)");
        return NULL;
    }
    int failed = PyDict_SetItem(*partitions, partition, fresh);
    Py_DECREF(fresh); /* the dict holds it */
    return failed ? NULL : fresh;
}

static PyObject *str_partitions, *str_records; /* interned at import */

/* The next partition's record-set span (a new reference), walking the TopicData tuple
   ``topics``: *topic_at and *part_at are the position, *parts (a new reference) the
   current topic's partitions. NULL with an exception when the walk runs out or an
   object is not what a walked request holds. */
static PyObject *next_walked_span(PyObject *topics, Py_ssize_t *topic_at, PyObject **parts,
                                  Py_ssize_t *part_at) {
    while (*parts == NULL || *part_at >= PyTuple_GET_SIZE(*parts)) {
        Py_CLEAR(*parts);
        if (*topic_at >= PyTuple_GET_SIZE(topics)) {
            PyErr_SetString(PyExc_ValueError, "rows(): fewer partitions than decisions");
            return NULL;
        }
        PyObject *found = PyObject_GetAttr(PyTuple_GET_ITEM(topics, *topic_at), str_partitions);
        if (found == NULL)
            return NULL;
        if (!PyTuple_Check(found)) {
            Py_DECREF(found);
            PyErr_SetString(PyExc_TypeError, "rows(): a topic's partitions are not a tuple");
            return NULL;
        }
        *parts = found;
        (*topic_at)++;
        *part_at = 0;
    }
    return PyObject_GetAttr(PyTuple_GET_ITEM(*parts, (*part_at)++), str_records);
}

/* See _ledger_native.h. */
Py_ssize_t rg_walked_partitions(PyObject *topics) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(topics); i++) {
        PyObject *parts = PyObject_GetAttr(PyTuple_GET_ITEM(topics, i), str_partitions);
        if (parts == NULL)
            return -1;
        Py_ssize_t n = PyTuple_Check(parts) ? PyTuple_GET_SIZE(parts) : -1;
        Py_DECREF(parts);
        if (n < 0)
            return -1; /* no exception: the caller takes the Python path */
        total += n;
    }
    return total;
}

/* 1 when the walk left partitions unread, 0 when none, -1 with an exception. */
static int walked_partitions_left(PyObject *topics, Py_ssize_t topic_at, PyObject *parts,
                                  Py_ssize_t part_at) {
    if (parts != NULL && part_at < PyTuple_GET_SIZE(parts))
        return 1;
    for (; topic_at < PyTuple_GET_SIZE(topics); topic_at++) {
        PyObject *rest = PyObject_GetAttr(PyTuple_GET_ITEM(topics, topic_at), str_partitions);
        if (rest == NULL)
            return -1;
        Py_ssize_t left = PyObject_Length(rest);
        Py_DECREF(rest);
        if (left != 0)
            return left < 0 ? -1 : 1;
    }
    return 0;
}

/* See _ledger_native.h. */
Py_ssize_t rg_encode_entry(PyObject *out_obj, Py_ssize_t pos, PyObject *head, double wall,
                           long long req, PyObject *client, double latency,
                           PyObject *decisions, PyObject *spans, PyObject *frame_obj,
                           PyObject *answer_obj, long version, PyObject *contexts,
                           PyObject *make_context, long long *made, rg_prep_t *prep) {
    int walk = PyTuple_Check(spans); /* the request's topics, not a list of spans */
    if (!PyByteArray_Check(out_obj) || !PyBytes_Check(head) || !PyBytes_Check(client) ||
        !(walk || PyList_Check(spans)) || !PyDict_Check(contexts)) {
        PyErr_SetString(PyExc_TypeError, "rows(): bad argument types");
        return ENC_ERROR;
    }
    if (pos < 0 || pos > PyByteArray_GET_SIZE(out_obj)) {
        PyErr_SetString(PyExc_ValueError, "rows(): pos outside the buffer");
        return ENC_ERROR;
    }
    PyObject *seq = PySequence_Fast(decisions, "decisions must be a sequence");
    if (seq == NULL)
        return ENC_ERROR;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (!walk && PyList_GET_SIZE(spans) != n) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "rows(): one span per decision");
        return ENC_ERROR;
    }

    Py_buffer frame = {0}, answer = {0}, target = {0};
    int have_answer = answer_obj != Py_None;
    result_t *results = NULL;
    Py_ssize_t n_results = 0, cursor = 0;
    Py_ssize_t ret = ENC_ERROR;
    PyObject *topic_key = NULL, *partitions = NULL;
    PyObject *row_decision = NULL, *row_context = NULL, *row_span = NULL;
    PyObject *walk_parts = NULL;
    Py_ssize_t walk_topic = 0, walk_part = 0;
    double last_age = NAN; /* differs from every age: the first row formats its own */
    char age_text[48], latency_text[48];
    size_t age_n = 0, latency_n = 4;
    out_t out = {NULL, (size_t)pos, 0};

    /* an export: the bytearray cannot be resized under us while a callback runs */
    if (PyObject_GetBuffer(out_obj, &target, PyBUF_WRITABLE) < 0)
        goto done;
    out.buf = target.buf;
    out.cap = (size_t)target.len;

    if (isnan(latency))
        memcpy(latency_text, "null", 4);
    else if ((latency_n = format_fixed(latency_text, latency, 1000.0, 3)) == 0)
        goto decline;
    if (PyObject_GetBuffer(frame_obj, &frame, PyBUF_SIMPLE) < 0)
        goto done;
    if (have_answer) {
        if (PyObject_GetBuffer(answer_obj, &answer, PyBUF_SIMPLE) < 0)
            goto done;
        if (version < 3 || version > 13)
            goto decline;
        n_results = read_results(answer.buf, answer.len, (int)version, &results);
        if (n_results == -2)
            goto done;
        if (n_results < 0)
            goto decline;
    }
    if (n > 0) { /* the entry's fields, once */
        size_t head_n = (size_t)PyBytes_GET_SIZE(head);
        size_t client_n = (size_t)PyBytes_GET_SIZE(client);
        if (!room(&out, head_n + client_n + latency_n + 120))
            goto full;
        if (prep != NULL)
            prep->head_need = (Py_ssize_t)(head_n + client_n + 120);
        put(&out, PyBytes_AS_STRING(head), head_n);
        size_t ts_n = format_fixed(out.buf + out.len, wall, 1e6, 6);
        if (ts_n == 0 || ts_n == 4) /* beyond exact integers, or not finite */
            goto decline;
        out.len += ts_n;
        PUT_LITERAL(&out, ",\"req\":");
        put_int(&out, req);
        PUT_LITERAL(&out, ",");
        put(&out, PyBytes_AS_STRING(client), client_n);
        PUT_LITERAL(&out, "\"latency_ms\":");
        if (prep != NULL)
            prep->latency_at = (Py_ssize_t)out.len;
        put(&out, latency_text, latency_n);
        PUT_LITERAL(&out, ",\"partitions\":[");
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the row's objects are held for the row: a callback (make_context) runs Python */
        Py_CLEAR(row_decision);
        Py_CLEAR(row_context);
        Py_CLEAR(row_span);
        if (i >= PySequence_Fast_GET_SIZE(seq) || (!walk && i >= PyList_GET_SIZE(spans))) {
            PyErr_SetString(PyExc_RuntimeError, "rows(): decisions or spans changed size");
            goto done;
        }
        PyObject *d = row_decision = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        if (walk) {
            if ((row_span = next_walked_span(spans, &walk_topic, &walk_parts, &walk_part)) == NULL)
                goto done;
        } else {
            row_span = Py_NewRef(PyList_GET_ITEM(spans, i));
        }
        if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 10) {
            PyErr_SetString(PyExc_TypeError, "rows(): a decision is not a Decision");
            goto done;
        }
        PyObject *context = lookup_context(contexts, make_context, d, &topic_key, &partitions,
                                           made);
        if (context == NULL)
            goto done;
        row_context = Py_NewRef(context);
        PyObject *text = PyTuple_GET_ITEM(context, 2), *code_obj = PyTuple_GET_ITEM(context, 3);

        double age = PyFloat_AsDouble(PyTuple_GET_ITEM(d, 9));
        if (age == -1.0 && PyErr_Occurred())
            goto done;
        if (!(age == last_age)) { /* NaN compares unequal: formatted each time, as in Python */
            last_age = age;
            if ((age_n = format_fixed(age_text, age, 1e6, 3)) == 0)
                goto decline;
        }

        int64_t records = 0, size = 0;
        PyObject *span = row_span;
        if (span != Py_None) {
            if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 2) {
                PyErr_SetString(PyExc_TypeError, "rows(): a span is not (start, end)");
                goto done;
            }
            Py_ssize_t start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
            Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
            if (PyErr_Occurred())
                goto done;
            size = (int64_t)end - (int64_t)start;
            records = record_count(frame.buf, frame.len, start, end);
        }

        size_t text_n = (size_t)PyBytes_GET_SIZE(text);
        /* the rest of the array: the context, 5 numbers of at most 24 bytes, the age */
        if (!room(&out, 1 + text_n + 140 + age_n))
            goto full;
        Py_ssize_t row_at = (Py_ssize_t)out.len;
        if (i > 0)
            PUT_LITERAL(&out, ",");
        put(&out, PyBytes_AS_STRING(text), text_n);
        if (prep != NULL) {
            if (code_obj != Py_None || have_answer || !isnan(latency) || i >= prep->cap) {
                PyErr_SetString(PyExc_ValueError, "rows(): nothing to prepare");
                goto done;
            }
            long index = PyLong_AsLong(PyTuple_GET_ITEM(d, 2));
            if (index == -1 && PyErr_Occurred())
                goto done;
            rg_hole_t *h = &prep->holes[i];
            h->at = (Py_ssize_t)out.len;
            h->index = index;
            h->key = Py_NewRef(PyTuple_GET_ITEM(d, 0));
            h->row_at = row_at;
            h->row_need = (Py_ssize_t)(1 + text_n + 140 + age_n);
            prep->n = i + 1;
        }
        if (code_obj != Py_None) { /* the proxy answered this partition itself */
            long long code = PyLong_AsLongLong(code_obj);
            if (code == -1 && PyErr_Occurred())
                goto done;
            put_int(&out, code);
            PUT_LITERAL(&out, ",null,null");
        } else if (!have_answer) {
            PUT_LITERAL(&out, "null,null,null");
        } else {
            if (cursor >= n_results)
                goto decline;
            result_t *res = &results[cursor];
            long partition = PyLong_AsLong(PyTuple_GET_ITEM(d, 2));
            if (partition == -1 && PyErr_Occurred())
                goto done;
            if (partition != res->index ||
                !key_equals(PyTuple_GET_ITEM(d, 0), res->key, res->key_len))
                goto decline;
            cursor++;
            put_answer(&out, res);
        }
        PUT_LITERAL(&out, ",");
        put_int(&out, records);
        PUT_LITERAL(&out, ",");
        put_int(&out, size);
        PUT_LITERAL(&out, ",");
        put(&out, age_text, age_n);
        PUT_LITERAL(&out, "]");
    }
    if (walk && walked_partitions_left(spans, walk_topic, walk_parts, walk_part) != 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "rows(): more partitions than decisions");
        goto done;
    }
    if (cursor != n_results)
        goto decline; /* answers for partitions the entry does not record */
    if (n > 0) {
        if (!room(&out, 3))
            goto full;
        PUT_LITERAL(&out, "]}\n");
    }
    ret = (Py_ssize_t)out.len;
    goto done;
full:
    ret = ENC_FULL;
    goto done;
decline:
    ret = ENC_DECLINE;
done:
    Py_XDECREF(row_decision);
    Py_XDECREF(row_context);
    Py_XDECREF(row_span);
    Py_XDECREF(walk_parts);
    Py_XDECREF(partitions);
    Py_XDECREF(topic_key);
    PyMem_Free(results);
    if (frame.obj != NULL)
        PyBuffer_Release(&frame);
    if (answer.obj != NULL)
        PyBuffer_Release(&answer);
    if (target.obj != NULL)
        PyBuffer_Release(&target);
    Py_DECREF(seq);
    return ret;
}

/* See _ledger_native.h. */
Py_ssize_t rg_finish_prepared(const char *line, Py_ssize_t line_len, const rg_prep_t *prep,
                              PyObject *answer_obj, long version, double latency,
                              PyObject *out_obj, Py_ssize_t pos) {
    if (!PyByteArray_Check(out_obj) || pos < 0 || pos > PyByteArray_GET_SIZE(out_obj) ||
        prep->n < 1 || version < 3 || version > 13 || answer_obj == Py_None)
        return ENC_DECLINE;
    char latency_text[48];
    size_t latency_n = format_fixed(latency_text, latency, 1000.0, 3);
    if (latency_n == 0 || latency_n == 4) /* beyond exact integers, or not finite */
        return ENC_DECLINE;
    Py_buffer answer = {0};
    if (PyObject_GetBuffer(answer_obj, &answer, PyBUF_SIMPLE) < 0)
        return ENC_ERROR;
    result_t *results = NULL;
    Py_ssize_t ret = ENC_DECLINE;
    Py_ssize_t n_results = read_results(answer.buf, answer.len, (int)version, &results);
    if (n_results == -2) {
        ret = ENC_ERROR;
        goto done;
    }
    if (n_results < 0)
        goto done; /* not a well-formed answer: declined */
    /* The checks are rg_encode_entry's, in its order (so a buffer fills, and an entry is
       declined, exactly as there): the room before the line and before each row, the
       answer's partition at each row, none left over, the room for the end. The line
       differs from the prepared one by the latency and each hole's "null,null,null"
       (14 bytes) becoming the answer's three numbers. */
    out_t out = {PyByteArray_AS_STRING(out_obj), (size_t)pos,
                 (size_t)PyByteArray_GET_SIZE(out_obj)};
    ret = ENC_FULL;
    if (!room(&out, (size_t)prep->head_need + latency_n))
        goto done;
    put(&out, line, (size_t)prep->latency_at);
    put(&out, latency_text, latency_n);
    Py_ssize_t from = prep->latency_at + 4; /* after the prepared "null" */
    for (Py_ssize_t i = 0; i < prep->n; i++) {
        const rg_hole_t *h = &prep->holes[i];
        put(&out, line + from, (size_t)(h->row_at - from));
        if (!room(&out, (size_t)h->row_need)) {
            ret = ENC_FULL;
            goto done;
        }
        put(&out, line + h->row_at, (size_t)(h->at - h->row_at));
        if (i >= n_results || results[i].index != h->index ||
            !key_equals(h->key, results[i].key, results[i].key_len)) {
            ret = ENC_DECLINE;
            goto done;
        }
        put_answer(&out, &results[i]);
        from = h->at + 14;
    }
    put(&out, line + from, (size_t)(line_len - 3 - from));
    if (n_results != prep->n) {
        ret = ENC_DECLINE; /* answers for partitions the entry does not record */
        goto done;
    }
    if (!room(&out, 3))
        goto done;
    put(&out, line + line_len - 3, 3); /* "]}\n" */
    ret = (Py_ssize_t)out.len;
done:
    PyMem_Free(results);
    PyBuffer_Release(&answer);
    return ret;
}

#define N_ARGS 14

/* rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer,
        version, contexts, make_context) -> int | None: see the module docstring. */
static PyObject *rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != N_ARGS) {
        PyErr_SetString(PyExc_TypeError, "rows() takes 14 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    double wall = PyFloat_AsDouble(args[3]);
    long long req = PyLong_AsLongLong(args[4]);
    double latency = args[6] == Py_None ? NAN : PyFloat_AsDouble(args[6]);
    long version = PyLong_AsLong(args[11]);
    if (PyErr_Occurred())
        return NULL;
    long long made = 0;
    Py_ssize_t end = rg_encode_entry(args[0], pos, args[2], wall, req, args[5], latency, args[7],
                                     args[8], args[9], args[10], version, args[12], args[13],
                                     &made, NULL);
    if (end == ENC_ERROR)
        return NULL;
    if (end == ENC_DECLINE)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(end);
}

static PyMethodDef methods[] = {
    {"rows", (PyCFunction)(void (*)(void))rows, METH_FASTCALL,
     "rows(out, pos, head, wall, req, client, latency_ms, decisions, spans, frame, answer, "
     "version, contexts, make_context) -> int | None: one ledger entry's JSON line written "
     "into the bytearray out from pos; the new end, -1 when out has no room for them, or "
     "None to use the Python encoder."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ledger_native",
    "The decision ledger's row encoder for the usual case (see proxy.ledger_rows).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ledger_native(void) {
    if (str_partitions == NULL)
        str_partitions = PyUnicode_InternFromString("partitions");
    if (str_records == NULL)
        str_records = PyUnicode_InternFromString("records");
    if (str_partitions == NULL || str_records == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (rg_add_completion_types(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
