/* Which gmt this is: the release, and the git commit the build was
 * configured from (CMakeLists.txt passes GMT_COMMIT; "unknown" outside a
 * git checkout). gmt-schd serves both as gmt_build_info. */
#ifndef GMT_VERSION_H
#define GMT_VERSION_H

#define GMT_VERSION "0.1.0"
#ifndef GMT_COMMIT
#define GMT_COMMIT "unknown"
#endif

#endif
