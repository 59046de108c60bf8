// MapReduce is reduce.cl instantiated twice: first with SKEL_LOAD(p) = map(inputs at p)
// (kernel skel_map_reduce, over the inputs), then with SKEL_LOAD(p) = partials[p]
// (kernel skel_reduce, over the per-group partials). Nothing else is needed here.
