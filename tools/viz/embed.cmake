# cmake -DIN=file -DOUT=file.c -DNAME=sym -P embed.cmake
# Writes `const char NAME[]` (NUL-terminated) and `const unsigned long NAME_len`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} */\nconst char ${NAME}[] = {\n${body}0x00};\nconst unsigned long ${NAME}_len = ${bytes};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
