/* The cable's implicit diffusion on a tree-shaped Purkinje network (cardiosim/purkinje/cable.py): a symmetric
 * matrix with one off-diagonal pair per edge, solved in O(n) by Hines' elimination, with no fill.
 *
 * Nodes are numbered so that every node's parent comes before it; a root (parent -1, node 0 and the first node of
 * any further tree of a forest) has none. a[i] is the matrix's entry between node i and parent[i] (unused at a
 * root); d holds the diagonal. */

/* d becomes the pivots: node by node from the leaves up, each eliminated into its parent. */
void cs_tree_factor(long n, const long *parent, const double *a, double *d)
{
    for (long i = n - 1; i > 0; --i)
        if (parent[i] >= 0)
            d[parent[i]] -= a[i] * a[i] / d[i];
}

/* b (the right-hand side) becomes the solution, with the pivots of cs_tree_factor. */
void cs_tree_solve(long n, const long *parent, const double *a, const double *d, double *b)
{
    for (long i = n - 1; i > 0; --i)
        if (parent[i] >= 0)
            b[parent[i]] -= a[i] / d[i] * b[i];
    for (long i = 0; i < n; ++i)
        b[i] = parent[i] >= 0 ? (b[i] - a[i] * b[parent[i]]) / d[i] : b[i] / d[i];
}
