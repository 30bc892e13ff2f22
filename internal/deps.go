package deps
import (
 _ "github.com/gin-gonic/gin"
 _ "github.com/redis/go-redis/v9"
 _ "gorm.io/gorm"
 _ "gorm.io/driver/mysql"
 _ "github.com/glebarez/sqlite"
 _ "github.com/alicebob/miniredis/v2"
 _ "github.com/google/uuid"
 _ "go.uber.org/goleak"
 _ "github.com/go-sql-driver/mysql"
)
