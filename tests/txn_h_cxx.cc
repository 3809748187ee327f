// txn_h_cxx.cc - txn.h in a C++ program: the header declares itself
// extern "C" for C++, so it (its inline part too) must compile as C++.
// Built with the tree wherever C++ is enabled; nothing to run.
#include "txn.h"

int txn_h_cxx_begin(txn_pool *p)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (!rc)
        rc = txn_commit(tx);
    return rc;
}
