/* chat_tools.h: a chat request's tools and tool_choice (chat_tools.c). */
#ifndef OX_APPS_SERVER_CHAT_TOOLS_H
#define OX_APPS_SERVER_CHAT_TOOLS_H

#include <jansson.h>

#include "reply.h"

struct state;

/* *family: the tool_calls.h syntax to parse the answer in (-1: none: no tools, or
 * tool_choice "none"); *grammar: GBNF forcing one call (tool_choice "required" or a named
 * function; malloc'd), else NULL. False with *err set for bad tools or tool_choice. */
bool chat_tools(struct state *s, json_t *req, int *family, char **grammar, struct reply *err);

#endif
