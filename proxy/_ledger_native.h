/* What the two halves of proxy._ledger_native share: the encoder
   (_ledger_native.c) and the completion types (_ledger_completion.c). */
#ifndef RACKGUARD_LEDGER_NATIVE_H
#define RACKGUARD_LEDGER_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define ENC_FULL (-1)    /* no room in out */
#define ENC_DECLINE (-2) /* not the usual case: the Python encoder does it */
#define ENC_ERROR (-3)   /* an exception is set */

/* One entry's line into the bytearray out_obj from pos (see rows() in
   _ledger_native.c): the new end, or ENC_FULL, ENC_DECLINE, ENC_ERROR. ``spans``
   is a list (one span per decision) or the request's TopicData tuple; a NaN
   ``latency`` is written as null. *made counts the contexts made (calls of
   make_context). */
Py_ssize_t rg_encode_entry(PyObject *out_obj, Py_ssize_t pos, PyObject *head, double wall,
                           long long req, PyObject *client, double latency,
                           PyObject *decisions, PyObject *spans, PyObject *frame_obj,
                           PyObject *answer_obj, long version, PyObject *contexts,
                           PyObject *make_context, long long *made);

/* Adds Chunk, Sink and Pending to the module (_ledger_completion.c); -1 with an
   exception. */
int rg_add_completion_types(PyObject *module);

#endif
