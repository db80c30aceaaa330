/* What the two halves of proxy._ledger_native share: the encoder
   (_ledger_native.c) and the completion types (_ledger_completion.c). */
#ifndef RACKGUARD_LEDGER_NATIVE_H
#define RACKGUARD_LEDGER_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define ENC_FULL (-1)    /* no room in out */
#define ENC_DECLINE (-2) /* not the usual case: the Python encoder does it */
#define ENC_ERROR (-3)   /* an exception is set */

/* Where a prepared line (an entry encoded before the broker's answer) takes the
   answer: the latency's "null" at latency_at, and per partition (n of them, room for
   cap) the "null,null,null" of its codes at holes[i].at, with the topic key (a strong
   reference) and partition index the answer must have in that place; and the room
   rg_encode_entry checks for, so that finishing fills a buffer exactly as encoding
   the whole entry would. */
typedef struct {
    Py_ssize_t at;
    long index;
    PyObject *key;
    Py_ssize_t row_at, row_need; /* the row's start and the room checked there */
} rg_hole_t;

typedef struct {
    Py_ssize_t latency_at, n, cap;
    rg_hole_t *holes;
    Py_ssize_t head_need; /* the room checked before the line, but for the latency's */
} rg_prep_t;

/* One entry's line into the bytearray out_obj from pos (see rows() in
   _ledger_native.c): the new end, or ENC_FULL, ENC_DECLINE, ENC_ERROR. ``spans``
   is a list (one span per decision) or the request's TopicData tuple; a NaN
   ``latency`` is written as null. *made counts the contexts made (calls of
   make_context). With ``prep`` (an entry without an answer, null latency, no
   synthetic codes: else a ValueError), the holes are recorded in it. */
Py_ssize_t rg_encode_entry(PyObject *out_obj, Py_ssize_t pos, PyObject *head, double wall,
                           long long req, PyObject *client, double latency,
                           PyObject *decisions, PyObject *spans, PyObject *frame_obj,
                           PyObject *answer_obj, long version, PyObject *contexts,
                           PyObject *make_context, long long *made, rg_prep_t *prep);

/* The prepared line ``line`` (line_len bytes, as rg_encode_entry wrote it with ``prep``)
   with the broker's answer and the latency, into the bytearray out_obj from pos: the
   new end, or ENC_FULL, ENC_DECLINE (the answer is not the usual one: exactly where
   rg_encode_entry declines it), ENC_ERROR. */
Py_ssize_t rg_finish_prepared(const char *line, Py_ssize_t line_len, const rg_prep_t *prep,
                              PyObject *answer_obj, long version, double latency,
                              PyObject *out_obj, Py_ssize_t pos);

/* The partitions of a walked request's topics (a tuple of TopicData); -1 with an
   exception, or without one when a topic's partitions are not a tuple. */
Py_ssize_t rg_walked_partitions(PyObject *topics);

/* Adds Chunk, Sink and Pending to the module (_ledger_completion.c); -1 with an
   exception. */
int rg_add_completion_types(PyObject *module);

#endif
